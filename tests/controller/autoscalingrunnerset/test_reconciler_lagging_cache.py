"""The AutoscalingRunnerSet's status copies its runner set's counts once: a pass that starts
before the cache shows the controller's own status write does not write the same counts again
(controller/runtime/expectations.py).

The lag is forced with the Kubernetes emulator's fault injection: the AutoscalingRunnerSet
informer's watch is dropped and its re-list and re-watch answered 500, so its cache keeps the set
from before the write while the runner set and listener informers go on.
"""

from __future__ import annotations

import pytest

from shared.api.kinds import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER_SET
from shared.typedefs import JSONDict
from tests.controller.autoscaling import converged, create_ars, get_ars
from tests.controller.conftest import CONTROLLER_USER, IN_CLUSTER, Rig, RigOptions


@pytest.fixture
def rig_options() -> RigOptions:
    # No EphemeralRunnerSet reconciler: the runner set's counts change by this test's patch only.
    return RigOptions(controllers=IN_CLUSTER)


def status_patches(rig: Rig) -> int:
    return rig.kube.requests.count(
        verb="patch",
        resource="autoscalingrunnersets",
        subresource="status",
        user=CONTROLLER_USER,
    )


async def test_a_pass_behind_its_own_status_write_does_not_repeat_it(rig: Rig) -> None:
    await create_ars(rig)
    _, _, listener = await converged(rig)
    await rig.settle()
    with rig.kube.faults.frozen_caches("autoscalingrunnersets"):
        before = status_patches(rig)
        await rig.objects.patch(
            EPHEMERAL_RUNNER_SET,
            rig.namespace,
            "arc",
            {"status": {"currentReplicas": 2, "pendingEphemeralRunners": 2}},
            status=True,
        )

        async def mirrored() -> JSONDict | None:
            status = ((await get_ars(rig)) or {}).get("status", {})
            return status if status.get("currentRunners") == 2 else None

        await rig.until(mirrored, what="counts on the AutoscalingRunnerSet")
        await rig.settle()
        assert status_patches(rig) == before + 1
        # The listener's change wakes the set again; its cache still shows the old counts.
        passes = rig.reconciles("autoscalingrunnerset")
        await rig.objects.patch(
            AUTOSCALING_LISTENER,
            rig.system_namespace,
            listener["metadata"]["name"],
            {"metadata": {"labels": {"touched": "yes"}}},
        )

        async def woken() -> bool:
            return rig.reconciles("autoscalingrunnerset") > passes

        await rig.until(woken, what="another pass over the set")
        await rig.settle()
        assert status_patches(rig) == before + 1, "the same counts were written again"
    await rig.settle()
    status = ((await get_ars(rig)) or {}).get("status", {})
    assert (status["currentRunners"], status["pendingEphemeralRunners"]) == (2, 2)
