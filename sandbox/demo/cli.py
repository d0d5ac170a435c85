"""`gha-sandbox demo`: run a workload through the whole system, watch it, and report on it.

Flags, the trace format, the report's keys and the invariants: docs/sandbox.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from sandbox.demo import chaos as modes
from sandbox.demo import drain as drains
from sandbox.demo import policy as policies
from sandbox.demo import soak as soaks
from sandbox.demo import workload as workloads
from sandbox.demo.cluster import Crash, System, SystemOptions, start_system
from sandbox.demo.observe import Observer
from sandbox.demo.progress import Progress
from sandbox.demo.report import build_report, print_summary, write_plot, write_report
from sandbox.demo.workload import JobSpec, WorkloadError
from sandbox.kube.kubelet.node import MAX_NODES

EXIT_INTERRUPTED = 130
TICK = 0.1


def add_system_flags(parser: argparse.ArgumentParser, *, max_runners: int) -> None:
    """The flags `demo` and `up` share: the runner set's bounds and the simulated latencies."""
    parser.add_argument("--min-runners", type=int, default=0, help="minRunners (default 0)")
    parser.add_argument(
        "--max-runners", type=int, default=max_runners, help=f"maxRunners (default {max_runners})"
    )
    parser.add_argument(
        "--pod-start-latency",
        type=float,
        default=5.0,
        help="simulated seconds from a runner pod's creation to its container starting (default 5)",
    )
    parser.add_argument(
        "--registration-latency",
        type=float,
        default=3.0,
        help="simulated seconds from the runner container starting to the runner connecting "
        "to the service (default 3)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="worker nodes of the Kubernetes emulator: sandbox-node, sandbox-node-2, ... "
        f"(1-{MAX_NODES}; default 1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox demo",
        description="Run a workload through the controller and a listener against the embedded "
        "emulators; show progress, check invariants, and end with a summary. Exits non-zero "
        "when a job was lost, a busy runner killed, an invariant violated or something left "
        "over. Times are simulated seconds (wall seconds times --speedup).",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--jobs", type=int, help="queue one burst of N jobs instead of the default")
    source.add_argument("--trace", type=Path, help="replay a CSV trace (docs/sandbox.md)")
    source.add_argument(
        "--soak", type=float, metavar="MINUTES", help="a steady job rate for MINUTES, sampling "
        "both processes' resources (docs/sandbox.md#soak)"
    )  # fmt: skip
    modes.add_flags(parser)
    drains.add_flags(parser)
    parser.add_argument(
        "--duration", type=float, default=30.0, help="with --jobs, each job's duration (default 30)"
    )
    parser.add_argument("--seed", type=int, default=1, help="the default workload's seed (1)")
    parser.add_argument(
        "--speedup", type=float, default=20.0, help="simulated seconds per wall second (20)"
    )
    add_system_flags(parser, max_runners=30)
    parser.add_argument(
        "--listener",
        choices=["in-cluster", "docker-run"],
        default="in-cluster",
        help="how the controller and the listener run: in-cluster (default), the controller's "
        "Deployment from manifests/ and the listener pod it makes, run by the Kubernetes "
        "emulator; docker-run, both as processes of the demo outside the cluster",
    )
    parser.add_argument(
        "--policy", type=Path, action="append", default=[], metavar="FILE",
        help="run the workload under this scalingPolicy (YAML or JSON) and then under a second "
        "--policy FILE or none (ARC's formula), and compare them (docs/sandbox.md#policy)",
    )  # fmt: skip
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the run here")
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="give up after this many wall seconds (600)"
    )
    parser.add_argument("--workdir", type=Path, help="keep logs and kubeconfigs here")
    return parser


def check_system_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not 0 <= args.min_runners <= args.max_runners or args.max_runners < 1:
        parser.error("needs 0 <= --min-runners <= --max-runners and --max-runners >= 1")
    if args.pod_start_latency < 0 or args.registration_latency < 0:
        parser.error("latencies must not be negative")
    if not 1 <= args.nodes <= MAX_NODES:
        parser.error(f"needs 1 <= --nodes <= {MAX_NODES}")


def _workload(args: argparse.Namespace) -> tuple[list[JobSpec], dict[str, Any]]:
    if args.trace is not None:
        jobs, source = workloads.load_trace(args.trace), f"trace:{args.trace}"
    elif args.jobs is not None:
        jobs, source = workloads.burst(args.jobs, args.duration), "burst"
    elif args.soak is not None:
        jobs, source = soaks.steady(args.soak, args.duration), "soak"
    else:
        jobs, source = workloads.default_workload(args.seed), "default"
    info = {
        "source": source,
        "seed": args.seed,
        "jobs": len(jobs),
        "span_s": max((j.queued_at for j in jobs), default=0.0),
        "sha256": workloads.digest(jobs),
    }
    return jobs, info


async def _enqueue(system: System, jobs: list[JobSpec], speedup: float, ids: list[int]) -> None:
    """Queue each job at its offset, compressed by `speedup`."""
    start = time.monotonic()
    for spec in jobs:
        delay = start + spec.queued_at / speedup - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        ids.append(
            system.gh.enqueue_job(
                labels=list(spec.labels) or system.labels,
                duration=spec.duration / speedup,
                result=spec.result,
                display_name=f"job-{len(ids)}",
            )
        )


def _settled(system: System, observer: Observer, jobs: list[JobSpec], ids: list[int]) -> bool:
    """Every job queued and completed, and the set back at its minimum."""
    if len(ids) < len(jobs):
        return False
    if any(system.gh.state.jobs[i].state != "completed" for i in ids):
        return False
    sample = observer.samples[-1] if observer.samples else None
    floor = policies.resting_count(system.options)
    return sample is not None and sample.desired == floor and sum(sample.phases.values()) == floor


async def run_demo(
    args: argparse.Namespace, jobs: list[JobSpec], info: dict[str, Any], *,
    scaling_policy: dict[str, Any] | None = None,
    outcome: list[tuple[dict[str, Any], Observer]] | None = None,
) -> int:  # fmt: skip
    """One run; `outcome` (for --policy) receives its report and observer."""
    console = Console()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    speedup = args.speedup
    options = SystemOptions(
        min_runners=args.min_runners,
        max_runners=args.max_runners,
        pod_start_latency=args.pod_start_latency / speedup,
        registration_latency=args.registration_latency / speedup,
        nodes=args.nodes,
        labels=tuple(sorted({label for job in jobs for label in job.labels})),
        seed=args.seed,
        listener=args.listener,
        scaling_policy=scaling_policy,
    )
    own_workdir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gha-sandbox-")) if own_workdir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        async with start_system(options, workdir) as system:
            console.print(
                f"sandbox: kube {system.kube.url}, actions {system.gh.url}; "
                f"{len(jobs)} jobs ({info['source']}), speed-up x{speedup:g}, "
                f"runners {args.min_runners}..{args.max_runners}",
                highlight=False,
                soft_wrap=True,
            )
            await system.wait_ready(stop)
            observer = Observer(
                system.gh,
                system.kube,
                max_runners=args.max_runners,
                speedup=speedup,
                listener_user=system.listener_user,
            )
            watching = asyncio.create_task(observer.run())
            ids: list[int] = []
            extras = await modes.attach(
                args, system, observer, ids, workdir=workdir, total_jobs=len(jobs)
            )
            feeding = asyncio.create_task(_enqueue(system, jobs, speedup, ids))
            crash, interrupted = await _watch(
                system, observer, jobs, ids, console=console, stop=stop,
                give_up_after=args.timeout, extras=extras,
            )  # fmt: skip
            feeding.cancel()
            for extra in extras:
                await extra.stop()
            teardown = await system.stop()
            observer.check_killed()
            await asyncio.sleep(TICK)
            watching.cancel()
            report = build_report(
                gh=system.gh,
                observer=observer,
                teardown=teardown,
                job_ids=ids,
                workload=info,
                options={k: v for k, v in vars(args).items() if k not in ("report", "plot")}
                | {
                    "trace": str(args.trace) if args.trace else None,
                    "workdir": None if own_workdir else str(workdir),
                },
                kube_requests=Counter(
                    (
                        r.user,
                        f"{r.verb} {r.resource}" + (f"/{r.subresource}" if r.subresource else ""),
                    )
                    for r in system.kube.requests.log
                ),
                crash=asdict(crash) if crash else None,
                interrupted=interrupted,
            )
            report["workload"]["missing"] = len(jobs) - len(ids)
            for extra in extras:
                extra.amend(report)
            if outcome is not None:
                outcome.append((report, observer))
        print_summary(console, report)
        if args.report:
            write_report(args.report, report)
        if args.plot:
            jobs_line = report["jobs"]
            queue = report["queue_time_s"]
            title = (
                f"{jobs_line['enqueued']} jobs, runners {args.min_runners}..{args.max_runners}: "
                f"queue time p50 {queue['p50']} s, p95 {queue['p95']} s; "
                f"utilisation {report['runners']['utilisation']:.0%}"
            )
            write_plot(args.plot, observer, max_runners=args.max_runners, title=title)
        if interrupted:
            return EXIT_INTERRUPTED
        return 0 if report["ok"] else 1
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


async def _watch(
    system: System,
    observer: Observer,
    jobs: list[JobSpec],
    ids: list[int],
    *,
    console: Console,
    stop: asyncio.Event,
    give_up_after: float,
    extras: Sequence[modes.Extension] = (),
) -> tuple[Crash | None, bool]:
    """Sample and show progress until the run settles, a component crashes, a signal comes or
    the timeout passes; returns the crash, if any, and whether a signal ended it."""
    started = time.monotonic()
    with Progress(console, total_jobs=len(jobs), max_runners=system.options.max_runners) as view:
        while True:
            view.update(observer.sample(ids), elapsed_wall=time.monotonic() - started)
            if system.crashed.done():
                crash = system.crashed.result()
                console.print(
                    f"{crash.component} exited with code {crash.exit_code}; the end of its log:\n"
                    f"{crash.log_tail}",
                    highlight=False,
                    markup=False,
                )
                return crash, False
            if stop.is_set():
                console.print("interrupted: stopping everything")
                return None, True
            if _settled(system, observer, jobs, ids) and all(x.settled() for x in extras):
                return None, False
            if time.monotonic() - started > give_up_after:
                console.print(f"gave up after {give_up_after:.0f} s")
                return None, False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=TICK)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_system_flags(parser, args)
    drains.check_flags(parser, args)
    if (args.jobs is not None and args.jobs < 0) or args.duration < 0 or args.speedup <= 0:
        parser.error("needs --jobs >= 0, --duration >= 0 and --speedup > 0")
    if args.chaos_rate <= 0 or (args.soak is not None and args.soak <= 0):
        parser.error("needs --chaos-rate > 0 and --soak > 0")
    try:
        jobs, info = _workload(args)
    except WorkloadError as exc:
        print(f"gha-sandbox demo: {exc}", file=sys.stderr)
        return 2
    if args.policy:
        policies.check(parser, args)
        return asyncio.run(policies.compare(args, jobs, info, run=run_demo))
    return asyncio.run(run_demo(args, jobs, info))
