"""A runner pod refused on create (docs/reconcilers.md#pod-creation-refused) through the emulators.

The Kubernetes emulator answers the pod create with an injected `403 Forbidden` whose Status
message is the one a ResourceQuota admission writes (`exceeded quota: ...`) or another refusal's.
Only the EphemeralRunner controller runs, without a kubelet, as in test_reconciler.py.
"""

from __future__ import annotations

from collections import Counter

import pytest

from shared.kube.objects import EVENT
from shared.typedefs import JSONDict
from tests.controller.conftest import CONTROLLER_USER, FAST, Rig, RigOptions

QUOTA_REFUSAL = (
    'pods "runner" is forbidden: exceeded quota: compute, requested: cpu=2, used: cpu=8, '
    "limited: cpu=8"
)


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",), kubelet=False)


def refuse_pod_creates(rig: Rig, message: str, *, count: int | None = None) -> None:
    rig.kube.faults.inject(verb="create", resource="pods", status=403, count=count, message=message)


def pod_creates(rig: Rig) -> Counter[int]:
    """The controller's pod create attempts, by response code."""
    return Counter(
        r.code
        for r in rig.kube.requests.log
        if r.user == CONTROLLER_USER and r.verb == "create" and r.resource == "pods"
    )


async def event_reasons(rig: Rig) -> set[str]:
    return {e["reason"] for e in (await rig.objects.list(EVENT, rig.namespace))["items"]}


async def phase(rig: Rig, name: str, expected: str) -> JSONDict:
    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        return runner if ((runner or {}).get("status") or {}).get("phase") == expected else None

    result: JSONDict = await rig.until(probe, what=f"phase {expected}")
    return result


@pytest.mark.parametrize("refusals", [1, 3])
async def test_quota_refusal_is_retried_until_the_pod_is_created(rig: Rig, refusals: int) -> None:
    refuse_pod_creates(rig, QUOTA_REFUSAL, count=refusals)
    name = (await rig.create_runner())["metadata"]["name"]
    await rig.until(lambda: rig.pod(name), what="pod")
    await rig.settle(delayed=True)
    assert pod_creates(rig) == {403: refusals, 201: 1}
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["status"]["phase"] == "Pending"
    assert runner["status"]["runnerId"] in rig.gh.state.runners
    assert await event_reasons(rig) == set()


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunner",),
            kubelet=False,
            settings=FAST.model_copy(update={"quota_give_up_seconds": 0.5}),
        )
    ],
)
async def test_runner_still_refused_by_quota_after_the_give_up_time_is_deleted(rig: Rig) -> None:
    refuse_pod_creates(rig, QUOTA_REFUSAL)
    name = (await rig.create_runner())["metadata"]["name"]

    async def gone() -> bool:
        return await rig.runner(name) is None

    await rig.until(gone, what=f"runner {name} deleted")
    assert set(pod_creates(rig)) == {403}
    assert not rig.gh.state.runners
    assert await event_reasons(rig) == set()


@pytest.mark.parametrize(
    "message",
    [
        'pods "runner" is forbidden: User "system:serviceaccount:arc:controller" cannot create '
        'resource "pods" in API group "" in the namespace "ci"',
        'pods "runner" is forbidden: failed quota: compute: must specify limits.cpu for: runner',
        'pods "runner" is forbidden: violates PodSecurity "restricted:latest": privileged '
        '(container "runner" must not set securityContext.privileged=true)',
    ],
    ids=["rbac", "quota-needs-limits", "pod-security"],
)
async def test_other_forbidden_pod_marks_the_runner_failed_without_retry(
    rig: Rig, message: str
) -> None:
    refuse_pod_creates(rig, message)
    name = (await rig.create_runner())["metadata"]["name"]
    failed = await phase(rig, name, "Failed")
    assert failed["status"]["reason"] == "InvalidPod"
    assert failed["status"]["message"] == f"Failed to create the pod: {message}"
    await rig.settle(delayed=True)
    assert pod_creates(rig) == {403: 1}
    assert failed["status"]["runnerId"] not in rig.gh.state.runners
    assert await event_reasons(rig) == {"InvalidPod"}
