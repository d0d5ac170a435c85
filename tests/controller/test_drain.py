"""`kubectl drain` of a node of a set's runners, as a cluster admin does it, while two of six
runners (over two nodes) run jobs (docs/reconcilers.md#busy-pods): the node's idle runners are
evicted at once and get new pods on the other node, its busy ones are refused (429) and keep
their jobs, the drain waits, and once the jobs end it completes. No job is lost: no runner fails
for its pod, no job is cancelled. Against the emulator's eviction API and disruption controller."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from controller.runners.busy import LABEL_RUNNER_BUSY
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import EVENT, POD_DISRUPTION_BUDGET
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions

KUBECTL = shutil.which("kubectl")
RUNNERS = 6
BUSY = 2
NODES = 2
"""Three runner pods a node: the drained node holds an idle one whatever the jobs' runners."""
DRAIN_SECONDS = 120

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(simulated_runners=True, tls=True, nodes=NODES)


async def start_jobs(rig: Rig, runners: list[JSONDict]) -> tuple[list[str], list[int]]:
    """Real jobs on `BUSY` runners, promoted as the listener does; their names and job ids."""
    rig.gh.state.require_acquire = False
    jobs = [rig.gh.enqueue_job(labels=["arc"], duration=3600) for _ in range(BUSY)]

    async def assigned() -> list[JSONDict] | None:
        taken = [
            r
            for r in runners
            if (found := rig.gh.state.runners.get(r["status"]["runnerId"])) is not None
            and found.job_id is not None
        ]
        return taken if len(taken) == BUSY else None

    busy: list[JSONDict] = await rig.until(assigned, what="jobs assigned", within=30)
    for runner in busy:
        job = rig.gh.state.runners[runner["status"]["runnerId"]].job_id
        await rig.set_status(
            runner["metadata"]["name"], phase="Running", jobId=f"job-{job}", jobRequestId=job
        )
    return [r["metadata"]["name"] for r in busy], jobs


async def test_a_drain_evicts_idle_runners_and_waits_for_busy_ones(
    rig: Rig, tmp_path: Path
) -> None:
    await rig.create_runner_set(replicas=RUNNERS, patch_id=1)
    runners = await rig.registered(RUNNERS)

    async def online() -> bool:
        return all(
            (found := rig.gh.state.runners.get(r["status"]["runnerId"])) is not None
            and found.online
            for r in runners
        )

    await rig.until(online, what="simulated runners online", within=30)
    busy, jobs = await start_jobs(rig, runners)
    idle = [r["metadata"]["name"] for r in runners if r["metadata"]["name"] not in busy]

    async def protected() -> bool:
        pods = [await rig.pod(name) for name in busy]
        return all(LABEL_RUNNER_BUSY in ((p or {})["metadata"].get("labels") or {}) for p in pods)

    await rig.until(protected, what="busy pods labelled")

    async def budget_closed() -> bool:
        budget = await rig.objects.get(POD_DISRUPTION_BUDGET, rig.namespace, "arc")
        status = budget.get("status") or {}
        # Synced by the disruption controller, counting the busy pods, allowing nothing.
        return status.get("expectedPods") == BUSY and status.get("disruptionsAllowed") == 0

    await rig.until(budget_closed, what="the budget synced with no disruption allowed")
    node = (await rig.pod(busy[0]) or {})["spec"]["nodeName"]
    on_node = {
        name
        for name in busy + idle
        if ((await rig.pod(name) or {}).get("spec") or {}).get("nodeName") == node
    }
    busy = [name for name in busy if name in on_node]
    idle = [name for name in idle if name in on_node]
    assert idle, "the drained node holds an idle runner"
    idle_pods = {name: (await rig.pod(name) or {})["metadata"]["uid"] for name in idle}

    kubeconfig = tmp_path / "kubeconfig"
    rig.kube.write_kubeconfig(kubeconfig)
    assert KUBECTL is not None
    started = asyncio.get_running_loop().time()
    drain = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={DRAIN_SECONDS}s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:

        async def idle_replaced() -> bool:
            pods = {name: await rig.pod(name) for name in idle}
            return all(
                p is not None and p["metadata"]["uid"] != idle_pods[n] for n, p in pods.items()
            )

        # Idle runners are evicted at once and get new pods.
        await rig.until(idle_replaced, what="idle runners evicted and replaced", within=30)
        # Busy ones are refused while the drain retries.
        for name in busy:
            pod = await rig.pod(name)
            assert pod is not None
            assert not pod["metadata"].get("deletionTimestamp"), name
        assert drain.returncode is None, "the drain must wait for the busy runners"

        for job in jobs:
            rig.gh.state.finish_job(job)
        async with asyncio.timeout(DRAIN_SECONDS):
            out, err = await drain.communicate()
        assert drain.returncode == 0, err.decode()
        assert "drained" in out.decode()
    finally:
        if drain.returncode is None:
            drain.kill()
            await drain.wait()
    print(f"drain took {asyncio.get_running_loop().time() - started:.1f} s")

    # No job lost: no runner failed for its pod, each job ran to its end.
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    assert not [e for e in events if e["reason"] in ("PodEvicted", "PodDeleted")]
    failed = [
        r["metadata"]["name"]
        for r in (await rig.objects.list(EPHEMERAL_RUNNER, rig.namespace))["items"]
        if (r.get("status") or {}).get("phase") == "Failed"
    ]
    assert failed == []
    for job in jobs:
        record = rig.gh.state.data.jobs[job]
        assert (record.state, record.final_result) == ("completed", "succeeded"), record
