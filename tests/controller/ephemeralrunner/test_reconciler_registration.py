"""A runner that cannot register says why and stops holding its slot
(docs/reconcilers.md#registration-failures): a wrong `runnerScaleSetId`, a missing GitHub
config Secret or unusable App credentials fail it at once with a reason and a Warning Event;
an error that may pass (5xx) is retried, reported, and fails the runner only after
`registration_timeout_seconds`.

Before this, such a runner got no status, no pod and no Event, and stayed for ever.
"""

from __future__ import annotations

import base64

import pytest

from sandbox.actions.credentials import generate_rsa_key, private_key_pem
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.objects import EVENT, SECRET
from shared.typedefs import JSONDict
from tests.controller.conftest import FAST, Rig, RigOptions

ER_ONLY = RigOptions(controllers=("ephemeralrunner",), kubelet=False)


@pytest.fixture
def rig_options() -> RigOptions:
    return ER_ONLY


async def phase(rig: Rig, name: str, expected: str) -> JSONDict:
    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        return runner if ((runner or {}).get("status") or {}).get("phase") == expected else None

    result: JSONDict = await rig.until(probe, what=f"phase {expected}")
    return result


async def warnings(rig: Rig) -> list[JSONDict]:
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    return [e for e in events if e["type"] == "Warning"]


async def config_secret(rig: Rig, name: str, **data: str) -> None:
    await rig.objects.create(
        SECRET,
        rig.namespace,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": rig.namespace},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        },
    )


async def assert_failed_at_once(rig: Rig, name: str, reason: str, message: str) -> JSONDict:
    failed = await phase(rig, name, "Failed")
    assert failed["status"]["reason"] == reason
    assert message in failed["status"]["message"]
    assert not failed["status"].get("runnerId")
    assert await rig.pod(name) is None
    assert await rig.secret(name) is None
    [event] = await warnings(rig)
    assert event["reason"] == reason
    assert event["involvedObject"]["name"] == name
    assert event["message"] == failed["status"]["message"]
    return failed


async def test_wrong_scale_set_id_fails_the_runner_at_once(rig: Rig) -> None:
    runner = await rig.create_runner(runnerScaleSetId=rig.scale_set_id + 1000)
    await assert_failed_at_once(
        rig,
        runner["metadata"]["name"],
        "ScaleSetNotFound",
        f"runner scale set {rig.scale_set_id + 1000} does not exist",
    )


async def test_missing_config_secret_fails_the_runner_at_once(rig: Rig) -> None:
    runner = await rig.create_runner(githubConfigSecret="not-there")
    await assert_failed_at_once(
        rig,
        runner["metadata"]["name"],
        "GitHubConfigSecretNotFound",
        f"the GitHub config secret not-there does not exist in namespace {rig.namespace}",
    )


async def test_unreadable_app_key_fails_the_runner_without_showing_it(rig: Rig) -> None:
    app = rig.gh.add_app()
    key = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    await config_secret(
        rig,
        "bad-app",
        github_app_id=app.app_id,
        github_app_installation_id=str(app.installation_id),
        github_app_private_key=key,
    )
    runner = await rig.create_runner(githubConfigSecret="bad-app")
    failed = await assert_failed_at_once(
        rig, runner["metadata"]["name"], "InvalidGitHubCredentials", "private key"
    )
    assert "bm90IGEga2V5" not in failed["status"]["message"]


async def test_app_key_github_refuses_fails_the_runner_without_showing_it(rig: Rig) -> None:
    app = rig.gh.add_app()
    other_key = private_key_pem(generate_rsa_key())
    await config_secret(
        rig,
        "wrong-app-key",
        github_app_id=app.app_id,
        github_app_installation_id=str(app.installation_id),
        github_app_private_key=other_key,
    )
    runner = await rig.create_runner(githubConfigSecret="wrong-app-key")
    failed = await assert_failed_at_once(
        rig, runner["metadata"]["name"], "GitHubCredentialsRefused", "status=401"
    )
    body = other_key.splitlines()[1]
    assert body not in failed["status"]["message"]
    assert all(body not in e["message"] for e in await warnings(rig))


async def test_service_errors_are_retried_and_reported_then_registration_succeeds(
    rig: Rig,
) -> None:
    """Each registration attempt is two requests (the test client retries once): three 503s
    fail one pass, and the next succeeds."""
    fault = rig.gh.faults.inject("generate_jit_config", status=503, count=3)
    runner = await rig.create_runner()
    name = runner["metadata"]["name"]
    [registered] = await rig.registered(1)
    assert fault.hits == 3
    assert registered["status"]["phase"] == "Pending"
    assert registered["status"].get("reason", "") == ""
    assert await rig.until(lambda: rig.pod(name), what="pod")
    [event] = await warnings(rig)
    assert event["reason"] == "RegistrationFailed"
    assert "status=503" in event["message"]


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunner",),
            kubelet=False,
            settings=FAST.model_copy(update={"registration_timeout_seconds": 0.3}),
        )
    ],
)
async def test_service_errors_fail_the_runner_after_the_registration_timeout(rig: Rig) -> None:
    rig.gh.faults.inject("generate_jit_config", status=503)
    runner = await rig.create_runner()
    failed = await phase(rig, runner["metadata"]["name"], "Failed")
    assert failed["status"]["reason"] == "RegistrationTimedOut"
    assert "status=503" in failed["status"]["message"]
    # A first attempt that already ran past the timeout fails the runner without a report.
    reasons = [e["reason"] for e in await warnings(rig)]
    assert sorted(reasons) in (
        ["RegistrationFailed", "RegistrationTimedOut"],
        ["RegistrationTimedOut"],
    )


@pytest.mark.parametrize("rig_options", [RigOptions(kubelet=False)])
async def test_a_set_replaces_runners_that_cannot_register(rig: Rig) -> None:
    """The slot a failed registration took is given back: the set replaces the Failed runner,
    and once the set's scale set id is right, the replacement registers."""
    await rig.create_runner_set()
    await rig.patch_spec({"ephemeralRunnerSpec": {"runnerScaleSetId": rig.scale_set_id + 1000}})
    await rig.scale(1, 1)

    async def replaced() -> JSONDict | None:
        for runner in await rig.live_runners():
            annotations = runner["metadata"].get("annotations") or {}
            if annotations.get("gha-runner-scaler/failed-runner-replacements"):
                return runner
        return None

    await rig.until(replaced, what="a replacement of the failed runner")
    await rig.patch_spec({"ephemeralRunnerSpec": {"runnerScaleSetId": rig.scale_set_id}})

    async def registered() -> bool:
        live = await rig.live_runners()
        return any((r.get("status") or {}).get("runnerId") for r in live)

    await rig.until(registered, what="a registered replacement")
    runner_set = await rig.objects.get(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")
    assert runner_set["spec"]["replicas"] == 1
