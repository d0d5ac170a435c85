"""Update predicates at work (docs/controller-runtime.md#predicates), observed through the
runtime's metrics: writes a reconciler does not read never wake it, writes it reads always do."""

from __future__ import annotations

import pytest

from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions, metric

POD_WATCH = "pod-to-ephemeralrunner"
RUNNER_WATCH = "ephemeralrunner-to-ephemeralrunnerset"


def dropped(rig: Rig, watch: str) -> float:
    return metric(rig.metrics(), "gha_runtime_predicate_dropped_total", watch=watch)


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=True)]
)
async def test_kubelet_status_churn_does_not_reconcile_the_runner(rig: Rig) -> None:
    created = await rig.create_runner()
    name = created["metadata"]["name"]

    async def ready() -> bool:
        runner = await rig.runner(name)
        return bool(((runner or {}).get("status") or {}).get("ready"))

    await rig.until(ready, what="runner ready")
    await rig.settle(delayed=True)
    # The kubelet's own binding and sandbox-ready writes were already dropped on the way up.
    assert dropped(rig, POD_WATCH) >= 1
    before_reconciles = rig.reconciles("ephemeralrunner")
    before_dropped = dropped(rig, POD_WATCH)
    pod = await rig.pod(name)
    assert pod is not None
    conditions = pod["status"]["conditions"]
    churn: list[JSONDict] = [
        {"podIP": "10.244.0.99", "podIPs": [{"ip": "10.244.0.99"}]},
        {"hostIP": "10.0.0.11", "hostIPs": [{"ip": "10.0.0.11"}]},
        {
            "conditions": [
                *[c for c in conditions if c["type"] != "PodReadyToStartContainers"],
                {"type": "PodReadyToStartContainers", "status": "False"},
            ]
        },
    ]
    for change in churn:
        await rig.pod_status(name, change)
        await rig.settle()
    assert rig.reconciles("ephemeralrunner") == before_reconciles
    assert dropped(rig, POD_WATCH) == before_dropped + len(churn)
    await rig.pod_status(
        name,
        {
            "conditions": [
                *[c for c in conditions if c["type"] != "Ready"],
                {"type": "Ready", "status": "False"},
            ]
        },
    )

    async def not_ready() -> bool:
        runner = await rig.runner(name)
        return ((runner or {}).get("status") or {}).get("ready") is False

    await rig.until(not_ready, what="readiness change reconciled")
    assert rig.reconciles("ephemeralrunner") > before_reconciles


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunnerset",), kubelet=False)]
)
async def test_runner_status_writes_other_than_phase_and_id_do_not_reconcile_the_set(
    rig: Rig,
) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    runners = await rig.count_runners(2)
    await rig.settle(delayed=True)
    name = runners[0]["metadata"]["name"]
    before_reconciles = rig.reconciles("ephemeralrunnerset")
    before_dropped = dropped(rig, RUNNER_WATCH)
    writes: list[JSONDict] = [
        {"ready": True},
        {"reason": "ContainerCreating", "message": "pulling image"},
        {"failures": {"uid-1": "2026-12-02T12:00:00Z"}},
        {"runnerName": name},
    ]
    for status in writes:
        await rig.set_status(name, **status)
        await rig.settle()
    assert rig.reconciles("ephemeralrunnerset") == before_reconciles
    assert dropped(rig, RUNNER_WATCH) == before_dropped + len(writes)
    # Read, but only counted into the set's status: one pass after the deferral window
    # (docs/controller-runtime.md#deferred-wakes), not at once.
    for status, fields in (
        ({"runnerId": 7}, "status.runnerId"),
        ({"phase": "Pending"}, "status.phase"),
    ):
        seen = rig.reconciles("ephemeralrunnerset")
        await rig.set_status(name, **status)
        await rig.settle(delayed=True)
        assert rig.reconciles("ephemeralrunnerset") == seen + 1
        assert rig.wakes("ephemeralrunnerset")[f"{RUNNER_WATCH} update deferred {fields}"] == 1
    # A finished runner is acted on (deleted or replaced): at once.
    await rig.set_status(name, phase="Failed")
    await rig.settle()
    assert rig.wakes("ephemeralrunnerset")[f"{RUNNER_WATCH} update status.phase"] == 1
