"""Queue time of a cold burst, and where it goes.

N jobs are queued at once against a runner set at 0 (minRunners 0, no warm runner) and the whole
system brings up a runner for each: the system of `gha-sandbox demo --listener docker-run`
(`sandbox.demo.cluster.start_system`), i.e. the real `gha-controller` and `gha-listener`
processes with their ServiceAccounts' RBAC against both emulators in this process, the kubelet
holding each pod `--pod-start-latency` seconds before its containers start and each simulated
runner connecting `--registration-latency` seconds after its container started (the demo's
defaults, 5 s and 3 s, here in real time). The Actions emulator offers the jobs as GitHub
Enterprise Server does (JobAvailable, acquired by the listener, then assigned), at most 50 job
events a message.

Every time comes from the emulators' own records, one clock (time.time()) for both:

    queued      the job's queue time (Actions emulator)
    delivered   a poll first received its JobAvailable (the job's `delivered_time`)
    patched     the EphemeralRunnerSet's `spec.replicas` first reached k (store event)
    created     the k-th EphemeralRunner created (store event)
    pod         the k-th runner Pod created (store event)
    running     the k-th Pod turned Running (store event: the kubelet's start latency is over)
    online      the k-th runner connected to the service (the runner's `online_time`)
    started     the job started on a runner (its `runner_assign_time`, JobStarted)

A job is bound to a runner only once one is online and idle, so the stages between delivery
and start are attributed by rank: the job queued k-th is charged the k-th replicas count
reached, runner created, pod created and running, and runner connected. Each stage is the
difference of two consecutive times, so a job's stages add up to its queue time. In this flow
every time is at least the one before it (the service hands jobs out in queue order and binds
the oldest job to the oldest idle runner); a stage below 0 would mean the attribution does not
hold, and is counted as `out_of_order`.

The physical floor of a job's queue time is the sum of what the emulators are told to take:
the pod start latency, the registration latency and one poll round trip (from the burst queued
to the first poll answer: the listener's long poll is waiting); the report gives the ratio of
the p50 to it. The whole burst is queued in one turn of the event loop (about 80 ms for 1,000
jobs), which the earliest jobs' listener-poll stage includes.

    .venv/bin/python -m bench.queue_time --jobs 100 [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sandbox.demo.cli import add_system_flags
from sandbox.demo.cluster import (
    ER_KEY,
    ERS_KEY,
    NAMESPACE,
    POD_KEY,
    System,
    SystemOptions,
    start_system,
)
from sandbox.demo.report import percentile
from sandbox.kube.store import Event, Subscription

STAGES = (
    ("listener poll", "queued -> its JobAvailable delivered to the listener's poll"),
    ("desired-count patch", "delivered -> the set's replicas reach k"),
    ("runner create", "replicas reach k -> k-th EphemeralRunner created"),
    ("pod create", "k-th runner -> k-th Pod created (JIT config, Secret, Pod)"),
    ("pod start", "k-th Pod created -> k-th Pod Running (the kubelet's start latency)"),
    ("registration", "k-th Pod Running -> k-th runner connected to the service"),
    ("job start", "k-th runner connected -> the job started on a runner"),
)
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


def demo_latencies() -> tuple[float, float]:
    """The demo's and `gha-sandbox up`'s default pod start and registration latencies."""
    parser = argparse.ArgumentParser()
    add_system_flags(parser, max_runners=1)
    defaults = parser.parse_args([])
    return float(defaults.pod_start_latency), float(defaults.registration_latency)


@dataclass
class JobRecord:
    id: int
    queued_at: float
    """time.time() of the job's queueing."""
    queue_time: float
    """Seconds from queued to started."""
    stages: dict[str, float]
    """Seconds per stage, in STAGES order; they add up to `queue_time`."""


@dataclass
class Result:
    jobs: int
    pod_start_latency: float
    registration_latency: float
    records: list[JobRecord]
    poll_round_trip: float
    """From the burst queued to the first poll answer: a waiting long poll answering."""
    replicas_patches: int
    """EphemeralRunnerSet writes that raised `spec.replicas` during the burst."""
    load: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds from the burst's queueing to its last start, by process: this one (both
    emulators, the kubelet, the simulated runners), the controller's and the listener's."""

    @property
    def floor(self) -> float:
        return self.pod_start_latency + self.registration_latency + self.poll_round_trip

    @property
    def out_of_order(self) -> int:
        """Stages below 0: where the attribution by rank does not hold."""
        return sum(1 for r in self.records for s in r.stages.values() if s < 0)

    def queue_times(self) -> list[float]:
        return [r.queue_time for r in self.records]

    def stage(self, name: str) -> list[float]:
        return [r.stages[name] for r in self.records]

    def share(self, name: str) -> float:
        """The stage's part of all the queue time of the burst."""
        total = sum(self.queue_times())
        return sum(self.stage(name)) / total if total > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        queue = self.queue_times()
        return {
            "jobs": self.jobs,
            "pod_start_latency_s": self.pod_start_latency,
            "registration_latency_s": self.registration_latency,
            "machine": {"host": platform.node(), "cores": os.cpu_count()},
            "load_average": self.load,
            "cpu_s": {who: round(seconds, 2) for who, seconds in self.cpu.items()},
            "queue_time_s": spread(queue),
            "stages": {
                name: {**spread(self.stage(name)), "share": round(self.share(name), 4)}
                for name, _ in STAGES
            },
            "floor_s": {
                "pod_start": self.pod_start_latency,
                "registration": self.registration_latency,
                "poll_round_trip": round(self.poll_round_trip, 4),
                "total": round(self.floor, 4),
            },
            "p50_over_floor": round(percentile(queue, 0.5) / self.floor, 3) if self.floor else None,
            "replicas_patches": self.replicas_patches,
            "out_of_order": self.out_of_order,
            "per_job": [asdict(r) for r in self.records],
        }


def cpu_seconds(system: System) -> dict[str, float]:
    """CPU time used so far by this process and by each of the system's subprocesses."""
    used = {"bench process": time.process_time()}
    for name, component in system.components.items():
        # /proc/<pid>/stat: user and system time are fields 14 and 15, counted after the
        # command name's closing parenthesis (the name may hold spaces).
        stat = Path(f"/proc/{component.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        used[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def spread(values: list[float]) -> dict[str, float]:
    return {key: round(percentile(values, q), 4) for key, q in QUANTILES}


@dataclass
class KubeTimes:
    """The commit times of the writes the burst caused, from the store's events."""

    replicas: list[tuple[float, int]] = field(default_factory=list)
    """(time, spec.replicas) of each write of the runner set that raised the count."""
    runners_created: list[float] = field(default_factory=list)
    pods_created: list[float] = field(default_factory=list)
    pods_running: list[float] = field(default_factory=list)

    def read(self, subscription: Subscription, runner_set: str) -> None:
        """Everything published since the subscription, up to now (no wait)."""
        running: set[str] = set()
        highest = 0
        while not subscription.queue.empty():
            event = subscription.queue.get_nowait()
            if not isinstance(event, Event):
                continue
            meta = event.obj["metadata"]
            if meta.get("namespace") != NAMESPACE:
                continue
            if event.key == ERS_KEY and meta["name"] == runner_set:
                replicas = int((event.obj.get("spec") or {}).get("replicas") or 0)
                if replicas > highest:
                    highest = replicas
                    self.replicas.append((event.committed_at, replicas))
            elif event.key == ER_KEY and event.type == "ADDED":
                self.runners_created.append(event.committed_at)
            elif event.key == POD_KEY and event.type == "ADDED":
                self.pods_created.append(event.committed_at)
            elif event.key == POD_KEY and event.type == "MODIFIED":
                phase = (event.obj.get("status") or {}).get("phase")
                if phase == "Running" and meta["uid"] not in running:
                    running.add(meta["uid"])
                    self.pods_running.append(event.committed_at)

    def replicas_reached(self, count: int) -> float:
        """When `spec.replicas` first reached `count`."""
        counts = [replicas for _, replicas in self.replicas]
        index = bisect.bisect_left(counts, count)
        if index == len(counts):
            raise RuntimeError(f"the runner set's replicas never reached {count}")
        return self.replicas[index][0]


def attribute(system: System, ids: list[int], kube: KubeTimes) -> list[JobRecord]:
    """Each job's stages: its own queue, delivery and start times, the rest by rank."""
    state = system.gh.state
    jobs = sorted((state.jobs[i] for i in ids), key=lambda j: (j.queue_time, j.id))
    online = sorted(
        r.online_time
        for r in state.runners.values()
        if r.scale_set_id == system.scale_set_id and r.online_time is not None
    )
    if any(job.runner_id not in state.runners for job in jobs):
        raise RuntimeError(
            "a job completed before the last one started, taking its runner's record: "
            "raise --job-seconds"
        )
    ranked = {
        "created": sorted(kube.runners_created),
        "pod": sorted(kube.pods_created),
        "running": sorted(kube.pods_running),
        "online": online,
    }
    short = {what: len(times) for what, times in ranked.items() if len(times) < len(jobs)}
    if short:
        raise RuntimeError(f"fewer records than jobs ({len(jobs)}): {short}")
    records = []
    for k, job in enumerate(jobs):
        if job.delivered_time is None or job.runner_assign_time is None:
            raise RuntimeError(f"job {job.id} started without a delivery on record")
        times = [
            job.queue_time,
            job.delivered_time,
            kube.replicas_reached(k + 1),
            ranked["created"][k],
            ranked["pod"][k],
            ranked["running"][k],
            ranked["online"][k],
            job.runner_assign_time,
        ]
        stages = {
            name: later - earlier
            for (name, _), (earlier, later) in zip(STAGES, itertools.pairwise(times), strict=True)
        }
        records.append(
            JobRecord(
                id=job.id,
                queued_at=job.queue_time,
                queue_time=job.runner_assign_time - job.queue_time,
                stages=stages,
            )
        )
    return records


async def all_started(system: System, ids: list[int], *, within: float) -> None:
    """Until every job started; raises when a component crashed or `within` passed."""
    jobs = system.gh.state.jobs
    cursor = 0

    def started() -> bool:
        # Jobs start about in queue order: resume from the first one not seen started, so
        # each state change costs a step or two rather than a pass over the burst.
        nonlocal cursor
        while cursor < len(ids) and jobs[ids[cursor]].runner_assign_time is not None:
            cursor += 1
        return cursor == len(ids)

    waiting = asyncio.ensure_future(system.gh.state.wait_for(started, within=within))
    either: set[asyncio.Future[Any]] = {waiting, system.crashed}
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():
        waiting.cancel()
        crash = system.crashed.result()
        raise RuntimeError(f"{crash.component} exited with {crash.exit_code}:\n{crash.log_tail}")
    try:
        waiting.result()
    except TimeoutError:
        raise TimeoutError(
            f"{len(ids) - cursor} of {len(ids)} jobs not started within {within:.0f}s"
        ) from None


async def run(
    jobs: int,
    *,
    pod_start_latency: float,
    registration_latency: float,
    job_seconds: float = 600.0,
    within: float = 600.0,
    workdir: Path | None = None,
) -> Result:
    """One cold burst of `jobs` through fresh emulators and processes."""
    options = SystemOptions(
        min_runners=0,
        max_runners=jobs,
        pod_start_latency=pod_start_latency,
        registration_latency=registration_latency,
        listener="docker-run",
    )
    load: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with start_system(options, workdir or Path(tmp)) as system:
            await asyncio.wait_for(system.wait_ready(asyncio.Event()), within)
            if system.crashed.done():
                crash = system.crashed.result()
                raise RuntimeError(f"{crash.component} did not start: {crash.log_tail}")
            subscription = system.kube.store.subscribe({ERS_KEY, ER_KEY, POD_KEY})
            load["start"] = os.getloadavg()
            cpu_before = cpu_seconds(system)
            ids = [
                system.gh.enqueue_job(
                    labels=system.labels, duration=job_seconds, display_name=f"job-{i}"
                )
                for i in range(jobs)
            ]
            try:
                await all_started(system, ids, within=within)
                load["end"] = os.getloadavg()
                cpu = {k: v - cpu_before[k] for k, v in cpu_seconds(system).items()}
                kube = KubeTimes()
                kube.read(subscription, system.runner_set_name())
                records = attribute(system, ids, kube)
                queued = [system.gh.state.jobs[i].queue_time for i in ids]
                delivered = [system.gh.state.jobs[i].delivered_time or 0.0 for i in ids]
            finally:
                system.kube.store.unsubscribe(subscription)
                # Ended here, the runners exit and the controller can clean up before the stop.
                for job_id in ids:
                    system.gh.cancel_job(job_id)
                await system.stop()
    return Result(
        jobs=jobs,
        pod_start_latency=pod_start_latency,
        registration_latency=registration_latency,
        records=records,
        poll_round_trip=max(0.0, min(delivered) - max(queued)),
        replicas_patches=len(kube.replicas),
        load=load,
        cpu=cpu,
    )


def table(result: Result) -> Table:
    out = Table(title=f"queue time of a cold burst of {result.jobs} jobs, seconds")
    out.add_column("")
    for key, _ in QUANTILES:
        out.add_column(key, justify="right")
    out.add_column("share", justify="right")
    queue = spread(result.queue_times())
    out.add_row("queue time", *(f"{queue[k]:.3f}" for k, _ in QUANTILES), "100 %")
    for name, _ in STAGES:
        values = spread(result.stage(name))
        out.add_row(name, *(f"{values[k]:.3f}" for k, _ in QUANTILES), f"{result.share(name):.1%}")
    return out


def report(result: Result, console: Console) -> None:
    console.print(table(result))
    for name, what in STAGES:
        console.print(f"  {name}: {what}", highlight=False)
    p50 = percentile(result.queue_times(), 0.5)
    console.print(
        f"physical floor {result.floor:.3f} s = pod start {result.pod_start_latency:g} s + "
        f"registration {result.registration_latency:g} s + poll round trip "
        f"{result.poll_round_trip * 1000:.1f} ms; p50 / floor = {p50 / result.floor:.2f}",
        highlight=False,
    )
    load = "; ".join(
        f"{when} {' '.join(f'{v:.2f}' for v in avg)}" for when, avg in result.load.items()
    )
    cpu = ", ".join(
        f"{who} {seconds:.1f} s ({seconds / result.jobs * 1000:.1f} ms per job)"
        for who, seconds in result.cpu.items()
    )
    console.print(
        f"replicas raised in {result.replicas_patches} writes; stages out of order: "
        f"{result.out_of_order}; CPU during the burst: {cpu}; load average at {load}; "
        f"{platform.node()}, {os.cpu_count()} cores",
        highlight=False,
    )


def main(argv: list[str] | None = None) -> int:
    pod_start, registration = demo_latencies()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100, help="N, the burst (default 100)")
    parser.add_argument(
        "--pod-start-latency",
        type=float,
        default=pod_start,
        help=f"seconds the kubelet holds a pod before its containers (default {pod_start:g})",
    )
    parser.add_argument(
        "--registration-latency",
        type=float,
        default=registration,
        help="seconds from a runner container's start to its connection "
        f"(default {registration:g})",
    )
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=600.0,
        help="each job's duration; the run ends once all started (default 600)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--json", type=Path, help="write the figures and every job's stages here")
    parser.add_argument("--workdir", type=Path, help="keep the processes' logs here")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.pod_start_latency < 0 or args.registration_latency < 0:
        parser.error("latencies must not be negative")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(
        run(
            args.jobs,
            pod_start_latency=args.pod_start_latency,
            registration_latency=args.registration_latency,
            job_seconds=args.job_seconds,
            within=args.timeout,
            workdir=args.workdir,
        )
    )
    report(result, Console())
    if args.json is not None:
        args.json.write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
