"""A plain http:// `githubConfigUrl` off loopback is refused before any credential is read,
unless GHA_CONTROLLER_ALLOW_INSECURE_GITHUB is on (docs/security.md#transport): the
AutoscalingRunnerSet says so in its ScaleSetRegistered condition and an Event, naming the field
and the setting."""

from __future__ import annotations

import pytest

from controller.autoscalinglistener.objects import listener_config
from controller.autoscalinglistener.rules import config_problem
from controller.github.clients import REASON_INSECURE_URL, ActionsClients, GitHubConfigError
from controller.settings import InClusterSettings, RunnerSettings
from shared.typedefs import JSONDict
from tests.controller.autoscaling import ALL, create_ars, get_ars
from tests.controller.autoscalingrunnerset.test_reconciler import events_of
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions

INSECURE = "http://ghes.example.com/my-org"


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


def secret_reads(rig: Rig) -> int:
    return sum(
        1
        for r in rig.kube.requests.log
        if r.user == CONTROLLER_USER and r.verb == "get" and r.resource == "secrets"
    )


async def test_an_insecure_url_is_refused_with_a_condition_and_an_event(rig: Rig) -> None:
    await create_ars(rig, githubConfigUrl=INSECURE)

    async def refused() -> JSONDict | None:
        conditions = ((await get_ars(rig)) or {}).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "ScaleSetRegistered"), None)

    condition = await rig.until(refused, what="the ScaleSetRegistered condition")
    assert condition["status"] == "False"
    assert condition["message"] == (
        f"githubConfigUrl {INSECURE} is plain http: the GitHub credentials would cross the "
        "network in clear; use https, or set GHA_CONTROLLER_ALLOW_INSECURE_GITHUB=true for a "
        "test GitHub Enterprise Server"
    )
    await rig.settle()
    assert (await events_of(rig, "arc")).count("ScaleSetRegistrationFailed") == 1
    # Refused before the config Secret was read: no credential was loaded for it.
    assert secret_reads(rig) == 0


async def test_the_opt_in_lets_an_insecure_url_through(rig: Rig) -> None:
    spec = {"githubConfigUrl": INSECURE, "githubConfigSecret": "github-secret"}
    refusing = ActionsClients(objects=rig.manager.objects)
    with pytest.raises(GitHubConfigError) as caught:
        await refusing.for_spec(rig.namespace, spec)
    assert caught.value.reason == REASON_INSECURE_URL
    allowing = ActionsClients(objects=rig.manager.objects, allow_insecure=True)
    try:
        client = await allowing.for_spec(rig.namespace, spec)
        assert client.config.url == INSECURE
    finally:
        await allowing.aclose()


def test_the_opt_in_is_a_controller_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RunnerSettings().allow_insecure_github is False
    monkeypatch.setenv("GHA_CONTROLLER_ALLOW_INSECURE_GITHUB", "true")
    assert RunnerSettings().allow_insecure_github is True


@pytest.mark.parametrize("allowed", [False, True])
def test_the_opt_in_reaches_the_listeners_config(
    monkeypatch: pytest.MonkeyPatch, allowed: bool
) -> None:
    """The controller's setting is written into each listener's config, which the listener's own
    model (checked before the Secret is written) then accepts; without it, it refuses."""
    monkeypatch.setenv("GHA_CONTROLLER_ALLOW_INSECURE_GITHUB", str(allowed).lower())
    settings = InClusterSettings().listener(RunnerSettings())
    listener = {
        "metadata": {"name": "arc-listener", "namespace": "system"},
        "spec": {
            "githubConfigUrl": INSECURE,
            "autoscalingRunnerSetNamespace": "arc",
            "ephemeralRunnerSetName": "arc-runners",
            "maxRunners": 5,
            "runnerScaleSetId": 1,
        },
    }
    config = listener_config(
        listener,
        credentials={"github_token": "t"},
        root_ca="",
        log_level="info",
        log_format="json",
        metrics_addr=settings.metrics_addr,
        metrics_endpoint=settings.metrics_endpoint,
        standby=settings.standby,
        allow_insecure_github=settings.allow_insecure_github,
    )
    problem = config_problem(config)
    if allowed:
        assert problem is None
    else:
        assert problem is not None
        assert "LISTENER_ALLOW_INSECURE_GITHUB" in problem
