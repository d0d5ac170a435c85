"""A burst of 100 jobs through both paths (docker-run: the runner set alone; in-cluster: an
AutoscalingRunnerSet with its listener), the test in the listener's place and with its identity
(scale, read, promote), simulated runners taking real jobs from the Actions emulator. What one
runner's life costs, per runner, in reconciles by kind and in Kubernetes requests of the
controller and the listener (docs/reconcilers.md#wakes-per-runner, BENCHMARKS.md#per-runner);
and that nothing is skipped (issue 43): every job's timeline kept (a `JobTimeline` Event per
job) and every busy pod protected (one pod patch per job carries the busy annotations and the
budget's label), docs/reconcilers.md#under-lag."""

from __future__ import annotations

import asyncio

import pytest

from controller.runners.busy import LABEL_RUNNER_BUSY
from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import EVENT
from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions

N = 100
KINDS = ("ephemeralrunner", "ephemeralrunnerset", "autoscalingrunnerset")
# Per runner, on both paths (issue targets, docs/reconcilers.md#wakes-per-runner). ARC spends
# 13 EphemeralRunner, 14 EphemeralRunnerSet and 9 AutoscalingRunnerSet reconciles and about 33
# requests per job (docs/reconcilers.md#arcs-figures).
MAX_RECONCILES = {"ephemeralrunner": 5.0, "ephemeralrunnerset": 3.0, "autoscalingrunnerset": 0.5}
MAX_REQUESTS_PER_JOB = 14.0


@pytest.fixture(params=["docker-run", "in-cluster"])
def rig_options(request: pytest.FixtureRequest) -> RigOptions:
    return RigOptions(simulated_runners=True) if request.param == "docker-run" else ALL


def is_listener(user: str) -> bool:
    return user.startswith("system:serviceaccount:") and user != CONTROLLER_USER


async def test_a_burst_of_100_jobs_costs_per_runner_a_fraction_of_arc(rig: Rig) -> None:
    rig.gh.state.require_acquire = False
    in_cluster = "autoscalingrunnerset" in {c.name for c in rig.manager.controllers}
    if in_cluster:
        await create_ars(rig, maxRunners=N)
        _, runner_set, _ = await converged(rig)
        name = runner_set["metadata"]["name"]
    else:
        name = "arc"
        await rig.create_runner_set(name=name)
    listener = await rig.as_listener(name)
    await rig.settle(deferred=True)
    rig.kube.requests.reset()
    before = {kind: rig.reconciles(kind) for kind in KINDS}
    wakes = {kind: rig.wakes(kind, fields=False) for kind in KINDS}

    await listener.patch(
        EPHEMERAL_RUNNER_SET, rig.namespace, name, {"spec": {"replicas": N, "patchID": 1}}
    )
    runners = await rig.registered(N)
    jobs = [rig.gh.enqueue_job(labels=["arc"], duration=3600) for _ in range(N)]

    async def all_assigned() -> bool:
        return sum(1 for r in rig.gh.state.runners.values() if r.job_id is not None) == N

    await rig.until(all_assigned, what="every job assigned")
    by_id = {r.id: r for r in rig.gh.state.runners.values()}

    async def promote(runner: str) -> None:
        # The listener on JobStarted: read the runner, then one status patch.
        current = await listener.get(EPHEMERAL_RUNNER, rig.namespace, runner)
        job = by_id[current["status"]["runnerId"]].job_id
        await listener.patch(
            EPHEMERAL_RUNNER,
            rig.namespace,
            runner,
            {
                "status": {
                    "phase": "Running",
                    "jobId": f"job-{job}",
                    "jobRequestId": job,
                    tl.TIMELINE_FIELD: {tl.JOB_STARTED: "2026-12-06T08:00:00Z"},
                }
            },
            status=True,
        )

    await asyncio.gather(*(promote(r["metadata"]["name"]) for r in runners))

    async def all_protected() -> bool:
        pods = [await rig.pod(r["metadata"]["name"]) for r in runners]
        return all(LABEL_RUNNER_BUSY in ((p or {})["metadata"].get("labels") or {}) for p in pods)

    # The jobs run longer than the controller takes to handle their events: every busy pod is
    # protected from the moment its runner's event is handled (docs/reconcilers.md#under-lag).
    await rig.until(all_protected, what="every busy pod protected")
    for job in jobs:
        rig.gh.state.finish_job(job)
    # The listener on the JobCompleted messages: nothing more is wanted.
    await listener.patch(
        EPHEMERAL_RUNNER_SET, rig.namespace, name, {"spec": {"replicas": 0, "patchID": 2}}
    )

    async def gone() -> bool:
        return not await rig.runners()

    await rig.until(gone, what="every runner cleaned up")
    await rig.settle(deferred=True)

    per_runner = {kind: (rig.reconciles(kind) - before[kind]) / N for kind in KINDS}
    causes = {kind: rig.wakes(kind, fields=False) - wakes[kind] for kind in KINDS}
    log = [r for r in rig.kube.requests.log if r.verb not in ("list", "watch")]
    controller = sum(1 for r in log if r.user == CONTROLLER_USER) / N
    listener_requests = sum(1 for r in log if is_listener(r.user)) / N
    report = f"{per_runner} requests/job: controller {controller}, listener {listener_requests}"
    for kind in ("ephemeralrunner", "ephemeralrunnerset"):
        assert per_runner[kind] <= MAX_RECONCILES[kind], (report, causes[kind])
    if in_cluster:
        kind = "autoscalingrunnerset"
        assert per_runner[kind] <= MAX_RECONCILES[kind], (report, causes[kind])
    # The listener: one scale-up and one scale-down patch for the burst, and per job the read
    # and the promotion.
    assert listener_requests == 2 + 2 / N, report
    assert controller + listener_requests <= MAX_REQUESTS_PER_JOB, report
    # Nothing skipped: explained jobs / jobs and busy-protected / busy runners read 1.00, and the
    # busy label costs no request (it rides on the annotations' patch: one per job).
    requests = rig.controller_requests()
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    explained = {e["involvedObject"]["name"] for e in events if e["reason"] == tl.EVENT_REASON}
    assert len(explained) / N == 1.0, report
    assert requests.get("patch pods", 0) / N == 1.0, (report, str(requests))
    assert "create poddisruptionbudgets" not in requests, requests
    print(report, causes, requests)
