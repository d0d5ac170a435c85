"""A plain http:// `githubConfigUrl` off loopback is refused before any credential is read,
unless GHA_CONTROLLER_ALLOW_INSECURE_GITHUB is on (docs/security.md#transport): the
AutoscalingRunnerSet says so in its ScaleSetRegistered condition and an Event, naming the field
and the setting."""

from __future__ import annotations

import pytest

from controller.github.clients import REASON_INSECURE_URL, ActionsClients, GitHubConfigError
from controller.settings import RunnerSettings
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
