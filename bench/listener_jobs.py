"""Listener cost and latency per job, against both emulators over loopback HTTP.

N EphemeralRunners (Pending, warm) each get a simulated runner; N jobs (5 s each, `--job-seconds`)
are enqueued at once. Measured until every job completed, every job message was taken and the
runner set settled back at 0 (patch id 0): the listener's
Kubernetes and Actions requests per job, the time from a job's JobStarted being emitted to its
runner showing `Running` (the listener's own latency, the long poll included: p50/p95/p99/max),
and how many runners were promoted only after their job had completed (the listener more than a
job's length behind; must be 0).

    .venv/bin/python bench/listener_jobs.py --jobs 100
    .venv/bin/python bench/listener_jobs.py --jobs 1000 --concurrency 1   # one at a time, as before
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from listener.app import credentials_of, serve
from listener.config import ListenerSettings
from sandbox.actions.emulator import ActionsEmulator
from sandbox.actions.state.records import Job
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.store import Event
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import PersonalAccessToken
from shared.actions.models import RunnerScaleSet

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
SAMPLE_SECONDS = 0.02
"""How often the end of the run is looked for."""
SET = "my-runners"


def apply_listener_rbac(
    kube: KubeEmulator, role: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """NAMESPACE, and the listener's identity and RBAC of manifests/listener in it; `role`, when
    given, rewrites the Role's document first (to name the sets it serves)."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for doc in yaml.safe_load_all((ROOT / "manifests/listener/rbac.yaml").read_text()):
        doc["metadata"]["namespace"] = NAMESPACE
        for subject in doc.get("subjects", []):
            subject["namespace"] = NAMESPACE
        if role is not None and doc["kind"] == "Role":
            role(doc)
        kube.apply(doc)


def example_runner_set() -> dict[str, Any]:
    """The EphemeralRunnerSet of manifests/examples/docker-run, as the file has it."""
    runner_set: dict[str, Any] = yaml.safe_load(
        (ROOT / "manifests/examples/docker-run/ephemeralrunnerset.yaml").read_text()
    )
    return runner_set


class OneSet(NamedTuple):
    """What `one_set` made and registered."""

    runners: list[str]
    """The EphemeralRunners' names, each Pending on the set."""
    token: str
    """The Actions service's PAT that registered the set."""
    client: ActionsClient
    scale_set: RunnerScaleSet


async def one_set(kube: KubeEmulator, gh: ActionsEmulator, runners: int) -> OneSet:
    """The CRDs, the listener's RBAC, the example EphemeralRunnerSet (SET) with `runners` runners
    of it, and SET registered with the Actions service by a new PAT: the caller closes the
    client."""
    kube.apply_crds(project_crds())
    apply_listener_rbac(kube)
    runner_set = example_runner_set()
    runner_set["metadata"]["namespace"] = NAMESPACE
    kube.apply(runner_set)
    ers = kube.store.get(("actions.github.com", "ephemeralrunnersets"), NAMESPACE, SET)
    assert ers is not None
    names = [f"runner-{i}" for i in range(runners)]
    for name in names:
        kube.apply(runner_object(ers, name))
    token = gh.add_pat()
    client = ActionsClient(config_url=gh.config_url(), credentials=PersonalAccessToken(token))
    scale_set = await client.create_runner_scale_set(RunnerScaleSet(name=SET))
    return OneSet(runners=names, token=token, client=client, scale_set=scale_set)


def runner_object(runner_set: dict[str, Any], name: str) -> dict[str, Any]:
    """A runner of `runner_set`: the listener records jobs only on its own set's runners."""
    owner = {
        "apiVersion": runner_set["apiVersion"],
        "kind": runner_set["kind"],
        "name": runner_set["metadata"]["name"],
        "uid": runner_set["metadata"]["uid"],
        "controller": True,
    }
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": [owner]},
        "spec": copy.deepcopy(runner_set["spec"]["ephemeralRunnerSpec"]),
    }


async def start_burst(
    gh: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    names: list[str],
    *,
    job_seconds: float,
) -> list[asyncio.Task[int]]:
    """A simulated runner for each of `names` (its JIT config from the service), then as many
    jobs of `job_seconds` for SET, queued at once: the caller ends the runners."""
    runners = []
    for name in names:
        config = await client.generate_jit_runner_config(scale_set.id, name=name)
        jit = config.encoded_jit_config.get_secret_value()
        runners.append(asyncio.create_task(gh.runtime.run_runner(jit)))
    for _ in names:
        gh.enqueue_job(labels=[SET], duration=job_seconds)
    return runners


def listener_kubeconfig(kube: KubeEmulator, folder: Path) -> Path:
    """A kubeconfig in `folder` with the token of the listener's ServiceAccount."""
    kubeconfig = folder / "kubeconfig"
    kube.write_kubeconfig(kubeconfig, token=kube.service_account_token(NAMESPACE, "gha-listener"))
    return kubeconfig


@dataclass
class Result:
    jobs: int
    elapsed: float
    """Seconds from the first runner started until every job completed and the set settled."""
    running_seen: int
    promoted_after_completion: int
    """Runners first seen `Running` after their job had completed: the listener behind."""
    latencies_ms: list[float]
    """JobStarted (the runner's assignment) -> `Running` seen, per runner."""
    kube_calls: Counter[str]
    actions_calls: Counter[str]

    def percentile(self, q: int) -> float:
        """The q-th percentile (1..99) of the latencies."""
        if len(self.latencies_ms) == 1:
            return self.latencies_ms[0]
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]


async def run(
    jobs: int,
    *,
    job_seconds: float = 5.0,
    concurrency: int | None = None,
    long_poll_seconds: float = 50.0,
) -> Result:
    """`long_poll_seconds`: how long the service holds an empty poll (the real one's ~50 s)."""
    async with (
        KubeEmulator(kubelet=False) as kube,
        ActionsEmulator(long_poll_timeout=long_poll_seconds) as gh,
    ):
        names, token, client, scale_set = await one_set(kube, gh, jobs)
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["KUBECONFIG"] = str(listener_kubeconfig(kube, Path(tmp)))
            settings = ListenerSettings(
                configure_url=gh.config_url(),
                github_token=token,
                ephemeral_runner_set_namespace=NAMESPACE,
                ephemeral_runner_set_name=SET,
                runner_scale_set_id=scale_set.id,
                max_runners=jobs,
                metrics_addr="",
            )
            if concurrency is not None:
                settings = replace(settings, job_started_concurrency=concurrency)
            stop = asyncio.Event()
            listener = asyncio.create_task(serve(settings, credentials_of(settings), stop=stop))
            await gh.state.wait_for(
                lambda: gh.state.count("create_session", status=200) > 0, within=30
            )
            kube.requests.reset()
            gh_requests_before = len(gh.state.requests)
            started = time.monotonic()
            runners = await start_burst(gh, client, scale_set, names, job_seconds=job_seconds)
            running_seen: dict[str, float] = {}
            completed_first: set[str] = set()
            store_key = ("actions.github.com", "ephemeralrunners")
            job_of: dict[str, Job] = {}

            def job_completed(name: str) -> bool:
                if name not in job_of:
                    job_of.update(
                        (job.runner_name, job) for job in gh.state.jobs.values() if job.runner_name
                    )
                job = job_of.get(name)
                return job is not None and job.state == "completed"

            async def observe() -> None:
                # The store publishes each write as it commits; this task wakes in the next
                # turn of the loop that runs both emulators, so the runner's phase and its
                # job's state are compared at (within one turn of) the write.
                while True:
                    event = await subscription.queue.get()
                    if not isinstance(event, Event):
                        return
                    name = event.obj["metadata"]["name"]
                    phase = (event.obj.get("status") or {}).get("phase")
                    if phase == "Running" and name not in running_seen:
                        running_seen[name] = time.monotonic()
                        if job_completed(name):
                            completed_first.add(name)

            subscription = kube.store.subscribe({store_key})
            observer = asyncio.create_task(observe())
            moved = False
            while True:
                spec = kube.store.get(("actions.github.com", "ephemeralrunnersets"), NAMESPACE, SET)
                done = all(job.state == "completed" for job in gh.state.jobs.values())
                # The statistics are the service's own, so the set can settle at 0 while job
                # messages still wait in the queue: the run ends when the listener took them all.
                queue = gh.state.queues[scale_set.id]
                drained = not queue.pending and not queue.messages
                assert spec is not None
                # The set starts at patch id 0 too: settled means back at 0 after the burst, a
                # publication that follows the handling of every job message.
                moved = moved or spec["spec"]["patchID"] != 0
                settled = (
                    moved and spec["spec"].get("replicas") == 0 and spec["spec"]["patchID"] == 0
                )
                if done and drained and settled:
                    break
                await asyncio.sleep(SAMPLE_SECONDS)
            elapsed = time.monotonic() - started
            observer.cancel()
            kube.store.unsubscribe(subscription)
            stop.set()
            await listener
            await asyncio.gather(*runners, return_exceptions=True)
        await client.aclose()
    user = f"system:serviceaccount:{NAMESPACE}:gha-listener"
    kube_calls = Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        for r in kube.requests.log
        if r.user == user
    )
    actions_calls = Counter(r.endpoint for r in gh.state.requests[gh_requests_before:])
    starts = {
        job.runner_name: job.runner_assign_time
        for job in gh.state.jobs.values()
        if job.runner_name and job.runner_assign_time is not None
    }
    # runner_assign_time is wall clock; convert the monotonic observations with one offset.
    offset = time.time() - time.monotonic()
    latencies = [
        (running_seen[name] + offset - starts[name]) * 1000
        for name in names
        if name in running_seen and name in starts
    ]
    return Result(
        jobs=jobs,
        elapsed=elapsed,
        running_seen=len(running_seen),
        promoted_after_completion=len(completed_first & set(running_seen)),
        latencies_ms=latencies,
        kube_calls=kube_calls,
        actions_calls=actions_calls,
    )


def report(result: Result) -> None:
    print(f"jobs: {result.jobs}, all completed and settled in {result.elapsed:.2f}s")
    print(f"Running seen on {result.running_seen} of {result.jobs} runners")
    print(f"runners promoted after their job completed: {result.promoted_after_completion}")
    kube_total = sum(result.kube_calls.values())
    print("listener Kubernetes requests:", dict(result.kube_calls), f"= {kube_total}")
    print("Actions requests (listener and runners):", dict(result.actions_calls))
    if result.latencies_ms:
        print(
            "JobStarted -> Running ms: "
            + ", ".join(f"p{q} {result.percentile(q):.1f}" for q in (50, 95, 99))
            + f", max {max(result.latencies_ms):.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--job-seconds", type=float, default=5.0)
    parser.add_argument(
        "--concurrency", type=int, default=None, help="job_started_concurrency (default: its own)"
    )
    args = parser.parse_args()
    report(asyncio.run(run(args.jobs, job_seconds=args.job_seconds, concurrency=args.concurrency)))


if __name__ == "__main__":
    main()
