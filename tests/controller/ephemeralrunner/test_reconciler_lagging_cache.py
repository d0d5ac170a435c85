"""The controller's `phase: Pending` writes carry the resourceVersion they were decided on
(docs/reconcilers.md#who-writes-what), so a cache that has not shown the listener's `Running`
yet cannot turn it back into `Pending`: the write is refused with 409, the runner is read again
and the decision made again.

The lag is forced with the Kubernetes emulator's fault injection: the runner informer's watch
is dropped and its re-list and re-watch answered 500 while the listener's patch goes through, so
the controller's runner cache stays on the object from before it.
"""

from __future__ import annotations

import pytest

from shared.typedefs import JSONDict
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",), kubelet=False)


RUNNING_READY: JSONDict = {
    "phase": "Running",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [{"name": "runner", "ready": True, "state": {"running": {}}}],
}


def refused_status_writes(rig: Rig) -> int:
    return rig.kube.requests.count(
        verb="patch",
        resource="ephemeralrunners",
        subresource="status",
        user=CONTROLLER_USER,
        code=409,
    )


async def test_pending_decided_on_a_lagging_cache_does_not_overwrite_running(rig: Rig) -> None:
    created = await rig.create_runner()
    name = created["metadata"]["name"]
    [runner] = await rig.registered(1)
    await rig.until(lambda: rig.pod(name), what="pod")
    # A registered runner without a phase, as ARC leaves one between its runner-id write and
    # its first phase write: the pod's next state makes the controller publish `Pending`.
    await rig.set_status(name, phase=None)
    await rig.settle()

    with rig.kube.faults.frozen_caches("ephemeralrunners"):
        await rig.job_started(runner)
        await rig.pod_status(name, RUNNING_READY)

        async def ready() -> JSONDict | None:
            current = await rig.runner(name)
            return current if (current or {}).get("status", {}).get("ready") else None

        written: JSONDict = await rig.until(ready, what="the runner's ready written")
        assert written["status"]["phase"] == "Running"
        assert written["status"]["jobId"] == "job-1"
        assert refused_status_writes(rig) == 1
    await rig.settle()
    final = await rig.runner(name)
    assert final is not None
    assert final["status"]["phase"] == "Running"
