"""One runner's life through the in-cluster path: an AutoscalingRunnerSet with its runner set
and listener, the test in the listener's place (scale, promote), a simulated runner taking a real
job. What the AutoscalingRunnerSet adds to the docker-run path's counts
(tests/controller/test_lifecycle.py) is counted here (docs/autoscaling.md#cost-per-runner)."""

from __future__ import annotations

import pytest

from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import Rig, RigOptions

# Measured with this test (docs/autoscaling.md#cost-per-runner): 18 = the docker-run path's
# lifecycle with one GitHub Secret read fewer (the client the scale set's registration built is
# reused) and three AutoscalingRunnerSet status patches (its counts follow the runner set's);
# the bound leaves room for one optimistic patch refused under load.
IN_CLUSTER_CONTROLLER_REQUESTS = 19
# ARC's AutoscalingRunnerSet reconciles 9 times here (docs/reconcilers.md#arcs-figures).
ARC_ARS_RECONCILES = 9


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


async def test_runner_lifecycle_through_an_autoscaling_runner_set(rig: Rig) -> None:
    rig.gh.state.require_acquire = False
    await create_ars(rig)
    await converged(rig)
    await rig.settle()
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
    name, job = await rig.start_one_job()
    await rig.scale(1, 2)
    await rig.settle()
    rig.gh.state.finish_job(job)

    async def gone() -> bool:
        return not await rig.runners() and await rig.pod(name) is None

    await rig.until(gone, what="runner and pod gone")
    await rig.scale(0, 3)
    await rig.settle()
    reconciles = {name: rig.reconciles(name) - count for name, count in before.items()}
    requests = rig.controller_requests()
    assert reconciles["autoscalinglistener"] == 0, "runner churn never wakes the listener's"
    assert reconciles["autoscalingrunnerset"] <= ARC_ARS_RECONCILES
    assert requests["patch autoscalingrunnersets/status"] == 3, requests
    assert sum(requests.values()) <= IN_CLUSTER_CONTROLLER_REQUESTS, requests
