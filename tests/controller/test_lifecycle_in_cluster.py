"""One runner's life through the in-cluster path: an AutoscalingRunnerSet with its runner set
and listener, the test in the listener's place (scale, promote), a simulated runner taking a real
job. What the AutoscalingRunnerSet adds to the docker-run path's counts
(tests/controller/test_lifecycle.py) is counted here (docs/autoscaling.md#cost-per-runner)."""

from __future__ import annotations

import pytest

from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import Rig, RigOptions

# Measured with this test (docs/autoscaling.md#cost-per-runner): 8 = the docker-run path's
# lifecycle with one GitHub Secret read fewer (the client the scale set's registration built is
# reused), no set status write and no AutoscalingRunnerSet status patch when the runner's life
# fits in one window (their copies of the counts read the same before and after). It was 10
# before a runner whose job is done deleted itself (docs/reconcilers.md#a-runner-that-succeeded).
IN_CLUSTER_CONTROLLER_REQUESTS = 8
# The count writes, held to a window each (docs/reconcilers.md#status-writes), depend on how
# many windows the runner's life spans, which the machine's speed decides: none when one, and
# at most two per writer, one showing the runner and one without it. They are bounded apart so
# that the 8 above stays exact: a single bound of 11, then 12, over all of them let a slow CI
# machine's four count writes fail the test, and would have let four more requests of any
# other kind through on a fast one.
COUNT_WRITES = ("patch ephemeralrunnersets/status", "patch autoscalingrunnersets/status")
COUNT_WRITES_PER_WRITER = 2
# ARC's AutoscalingRunnerSet reconciles 9 times here (docs/reconcilers.md#arcs-figures).
ARC_ARS_RECONCILES = 9


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


async def test_runner_lifecycle_through_an_autoscaling_runner_set(rig: Rig) -> None:
    rig.gh.state.require_acquire = False
    await create_ars(rig)
    await converged(rig)
    await rig.settle(deferred=True)
    rig.kube.requests.reset()
    before = {
        name: rig.reconciles(name)
        for name in (
            "ephemeralrunner",
            "ephemeralrunnerset",
            "autoscalingrunnerset",
            "autoscalinglistener",
        )
    }
    wakes = {name: rig.wakes(name, fields=False) for name in before}
    name, job = await rig.start_one_job()
    await rig.scale(1, 2)
    await rig.settle()
    # The listener's patch for the finished job comes before the runner's exit, as in
    # tests/controller/test_lifecycle.py (the other order refills the gap for a moment).
    await rig.scale(0, 3)
    await rig.settle()
    rig.gh.state.finish_job(job)

    async def gone() -> bool:
        return not await rig.runners() and await rig.pod(name) is None

    await rig.until(gone, what="runner and pod gone")
    await rig.settle(deferred=True)
    reconciles = {name: rig.reconciles(name) - count for name, count in before.items()}
    requests = rig.controller_requests()
    causes = {name: rig.wakes(name, fields=False) - count for name, count in wakes.items()}
    assert reconciles["autoscalinglistener"] == 0, "runner churn never wakes the listener's"
    # The set only copies the runner set's counts: deferred wakes alone, at most one per window
    # the runner's life spans, never the listener's replicas patches
    # (docs/controller-runtime.md#deferred-wakes); none at all when the runner set's own count
    # writes, held to their window, end where they began (a life shorter than a second).
    assert set(causes["autoscalingrunnerset"]) <= {
        "ephemeralrunnerset-to-autoscalingrunnerset update deferred"
    }, causes
    assert reconciles["autoscalingrunnerset"] <= 3 < ARC_ARS_RECONCILES
    assert reconciles["ephemeralrunner"] <= 4
    # Of the listener's three patches only the one asking for the runner wakes the set, and the
    # runner's going does not (it was 6: tests/controller/test_lifecycle.py says why).
    assert reconciles["ephemeralrunnerset"] <= 3
    requests = rig.controller_requests()
    assert (
        requests.get("patch autoscalingrunnersets/status", 0) <= reconciles["autoscalingrunnerset"]
    )
    counts = {key: requests.pop(key, 0) for key in COUNT_WRITES}
    assert all(n <= COUNT_WRITES_PER_WRITER for n in counts.values()), counts
    assert sum(requests.values()) <= IN_CLUSTER_CONTROLLER_REQUESTS, requests
