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

Each job's queue time is the Actions emulator's record: from its queue time to its runner
assignment (`runner_assign_time`, one clock, time.time()). Where it went comes from the system's
own instrumentation (docs/job-timeline.md), not from a computation of the bench: the
`JobTimeline` Event the controller writes on each runner, whose annotation holds the moments the
listener and the controller recorded, on the listener's clock. The stages are the timeline's
(`listener`, `capacity`, `controller`, `scheduling`, `container_start`, `registration`,
`job_start`), preceded by `offer`: from the job's `queued` moment (GitHub's queueTime shifted by
the skew the listener measured) to the listener receiving its JobAvailable.

The stages of a job add up to the instrumentation's queue time, `jobStarted` - `queued` on the
listener's clock. It differs from the emulator's by the JobStarted message's delivery to the
listener (the timeline ends when the listener receives it) less the JobAvailable message's
(counted in the measured skew, so outside `offer`): a few milliseconds while the listener's long
poll is waiting; `delivery` in the report is the largest difference. A stage is never negative:
a moment earlier than the one before it is taken as equal to it (the timeline's clamp: the
cluster's timestamps are whole seconds, so each stage between two of them is exact to a second
either way), and `clamped` counts the moments so taken.

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
from sandbox.demo.cluster import ERS_KEY, NAMESPACE, System, SystemOptions, start_system
from sandbox.demo.report import percentile
from sandbox.kube.store import Event, Subscription
from shared.api import timeline as tl
from shared.typedefs import JSONDict

EVENT_KEY = ("", "events")

OFFER = "offer"
STAGES = (
    (OFFER, "queued -> the listener received its JobAvailable"),
    (tl.STAGE_LISTENER, "JobAvailable received -> the listener's set patch counting the job"),
    (tl.STAGE_CAPACITY, "that patch -> the runner created, when the set was at maxRunners"),
    (tl.STAGE_CONTROLLER, "that patch (or the runner created) -> its Pod created"),
    (tl.STAGE_SCHEDULING, "Pod created -> PodScheduled"),
    (tl.STAGE_CONTAINER_START, "PodScheduled -> the runner container started"),
    (tl.STAGE_REGISTRATION, "container started -> GitHub assigned the job to the runner"),
    (tl.STAGE_JOB_START, "assigned -> the listener received JobStarted"),
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
    """Seconds from queued to the runner assignment, the Actions emulator's record."""
    stages: dict[str, float]
    """Seconds per stage, in STAGES order, from the job's JobTimeline Event; they add up to the
    instrumentation's queue time (`jobStarted` - `queued`)."""
    clamped: int
    """The timeline's moments taken as equal to the one before them (never a negative stage)."""


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
    def clamped(self) -> int:
        return sum(r.clamped for r in self.records)

    @property
    def delivery(self) -> float:
        """The largest difference between a job's stages summed and its queue time."""
        return max(abs(sum(r.stages.values()) - r.queue_time) for r in self.records)

    def queue_times(self) -> list[float]:
        return [r.queue_time for r in self.records]

    def stage(self, name: str) -> list[float]:
        return [r.stages[name] for r in self.records]

    def share(self, name: str) -> float:
        """The stage's part of all the stages of the burst (the instrumentation's queue time)."""
        total = sum(sum(r.stages.values()) for r in self.records)
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
            "clamped": self.clamped,
            "delivery_s": round(self.delivery, 4),
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
class Replicas:
    """The writes of the runner set that raised its count, from the store's events."""

    raised: list[tuple[float, int]] = field(default_factory=list)
    """(commit time, spec.replicas) of each."""

    def read(self, subscription: Subscription, runner_set: str) -> None:
        """Everything published since the subscription, up to now (no wait)."""
        highest = 0
        while not subscription.queue.empty():
            event = subscription.queue.get_nowait()
            if not isinstance(event, Event):
                continue
            meta = event.obj["metadata"]
            if meta.get("namespace") == NAMESPACE and meta["name"] == runner_set:
                replicas = int((event.obj.get("spec") or {}).get("replicas") or 0)
                if replicas > highest:
                    highest = replicas
                    self.raised.append((event.committed_at, replicas))


def timeline_of(event: JSONDict) -> tl.Timeline | None:
    """The timeline a `JobTimeline` Event keeps, None for any other Event."""
    annotation = (event["metadata"].get("annotations") or {}).get(tl.EVENT_ANNOTATION)
    if event.get("reason") != tl.EVENT_REASON or not annotation:
        return None
    return tl.Timeline.from_json(str(annotation))


async def recorded_timelines(
    system: System, subscription: Subscription, job_ids: set[str], *, within: float
) -> dict[str, tl.Timeline]:
    """The JobTimeline Event of every job, as the controller creates them (it writes one once
    the listener's part is on the runner, just after the job started)."""
    found: dict[str, tl.Timeline] = {}
    async with asyncio.timeout(within):
        while not job_ids <= found.keys():
            event = await subscription.queue.get()
            if system.crashed.done():
                crash = system.crashed.result()
                raise RuntimeError(f"{crash.component} exited:\n{crash.log_tail}")
            if not isinstance(event, Event) or event.type != "ADDED":
                continue
            timeline = timeline_of(event.obj)
            if timeline is not None:
                found[str(timeline.moments.get(tl.JOB_ID))] = timeline
    return found


def attribute(system: System, ids: list[int], timelines: dict[str, tl.Timeline]) -> list[JobRecord]:
    """Each job's queue time (the emulator's record) and stages (its recorded timeline)."""
    state = system.gh.state
    records = []
    for job in sorted((state.jobs[i] for i in ids), key=lambda j: (j.queue_time, j.id)):
        if job.runner_assign_time is None:
            raise RuntimeError(f"job {job.id} has no start on record")
        timeline = timelines[job.job_id]
        moments = timeline.moments
        queued, offered = (tl.parse_moment(str(moments[m])) for m in (tl.QUEUED, tl.RECEIVED))
        stages = {name: 0.0 for name, _ in STAGES}
        stages[OFFER] = max((offered - queued).total_seconds(), 0.0)
        stages.update({stage.name: stage.seconds for stage in timeline.stages()})
        records.append(
            JobRecord(
                id=job.id,
                queued_at=job.queue_time,
                queue_time=job.runner_assign_time - job.queue_time,
                stages=stages,
                clamped=timeline.clamped() + (offered < queued),
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
            subscription = system.kube.store.subscribe({ERS_KEY})
            events = system.kube.store.subscribe({EVENT_KEY})
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
                timelines = await recorded_timelines(
                    system,
                    events,
                    {system.gh.state.jobs[i].job_id for i in ids},
                    within=within,
                )
                replicas = Replicas()
                replicas.read(subscription, system.runner_set_name())
                records = attribute(system, ids, timelines)
                queued = [system.gh.state.jobs[i].queue_time for i in ids]
                delivered = [system.gh.state.jobs[i].delivered_time or 0.0 for i in ids]
            finally:
                system.kube.store.unsubscribe(subscription)
                system.kube.store.unsubscribe(events)
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
        replicas_patches=len(replicas.raised),
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
        f"replicas raised in {result.replicas_patches} writes; moments clamped: "
        f"{result.clamped}; stages vs queue time: within {result.delivery * 1000:.1f} ms; "
        f"CPU during the burst: {cpu}; load average at {load}; "
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
