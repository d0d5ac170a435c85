"""The end of a run: figures from the observer and both emulators, as a summary table, a JSON
report (keys in docs/sandbox.md#report) and a plot."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sandbox.actions import ActionsEmulator
from sandbox.demo.cluster import NAMESPACE, Teardown
from sandbox.demo.observe import Observer
from shared.api.timeline import EVENT_REASON, STAGES

EVENT_KEY = ("", "events")


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no value)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def spread(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 0.5), 2),
        "p95": round(percentile(values, 0.95), 2),
        "max": round(max(values, default=0.0), 2),
    }


def stage_split(observer: Observer) -> dict[str, dict[str, float]]:
    """p50/p95/max per stage of the jobs' waits (docs/job-timeline.md#stages), in simulated
    seconds; a job contributes 0 to a stage it did not go through (an idle runner took it: no
    cluster stage; not held: no capacity), so the percentiles are over every job that started."""
    per_stage: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for timeline in observer.timelines.values():
        seconds = {stage.name: stage.seconds for stage in timeline.stages()}
        for stage, values in per_stage.items():
            values.append(seconds.get(stage, 0.0) * observer.speedup)
    return {stage: spread(values) for stage, values in per_stage.items()}


def nothing_skipped(
    observer: Observer, kube_requests: Counter[tuple[str, str]], jobs: int
) -> dict[str, float]:
    """Issue 43's ratios, 1.00 when nothing was skipped under lag: jobs whose timeline the
    controller kept (a `JobTimeline` Event on their runner) per job completed, and the
    controller's busy-pod patches (one per busy runner: docs/reconcilers.md#under-lag) per
    runner the listener made `Running`."""
    explained = {
        str((event.get("involvedObject") or {}).get("uid"))
        for event in observer.kube.store.items(EVENT_KEY, NAMESPACE)
        if event.get("reason") == EVENT_REASON
    }
    busy = sum(1 for track in observer.runners.values() if track.running_by)
    patches = kube_requests[(observer.controller_user, "patch pods")]
    return {
        "explained_jobs_per_job": round(len(explained) / jobs, 2) if jobs else 0.0,
        "busy_protected_per_busy_runner": round(patches / busy, 2) if busy else 0.0,
    }


def build_report(
    *,
    gh: ActionsEmulator,
    observer: Observer,
    teardown: Teardown,
    job_ids: list[int],
    workload: dict[str, Any],
    options: dict[str, Any],
    kube_requests: Counter[tuple[str, str]],
    crash: dict[str, Any] | None,
    interrupted: bool,
) -> dict[str, Any]:
    speedup = observer.speedup
    jobs = [gh.state.jobs[i] for i in job_ids]
    completed = [j for j in jobs if j.state == "completed" and j.final_result != "canceled"]
    queue_times = [
        (j.runner_assign_time - j.queue_time) * speedup
        for j in jobs
        if j.runner_assign_time is not None
    ]
    tracks = list(observer.runners.values())
    scale_up = [t.running_at - t.created for t in tracks if t.running_at is not None]
    busy_s = idle_s = 0.0
    for before, after in zip(observer.samples, observer.samples[1:], strict=False):
        busy_s += before.busy * (after.t - before.t)
        idle_s += before.idle * (after.t - before.t)
    created = len(tracks)
    enqueued = len(job_ids)

    def per_job(count: int) -> float:
        return round(count / enqueued, 2) if enqueued else 0.0

    identities = (("controller", observer.controller_user), ("listener", observer.listener_user))
    report: dict[str, Any] = {
        "workload": workload,
        "options": options,
        "elapsed_s": round(observer.elapsed(), 2),
        "interrupted": interrupted,
        "jobs": {
            "enqueued": enqueued,
            "completed": len(completed),
            "succeeded": sum(1 for j in completed if j.final_result == "succeeded"),
            "failed": sum(1 for j in completed if j.final_result == "failed"),
            # Jobs of the workload that never completed, queued or not (a run cut short).
            "lost": workload["jobs"] - len(completed),
        },
        "queue_time_s": spread(queue_times),
        "scale_up_latency_s": spread(scale_up),
        "stage_split_s": stage_split(observer),
        "stage_split_jobs": len(observer.timelines),
        "nothing_skipped": nothing_skipped(observer, kube_requests, len(completed)),
        "jobs_waited_at_max_runners": sum(
            1 for t in observer.timelines.values() if t.capacity.endswith("maxRunners")
        ),
        "runners": {
            "created": created,
            "max_concurrent": observer.max_concurrent,
            "max_desired": observer.max_desired,
            "killed_while_busy": observer.killed_while_busy,
            "utilisation": round(busy_s / (busy_s + idle_s), 3) if busy_s + idle_s else 0.0,
            "busy_runner_seconds": round(busy_s, 1),
            "idle_runner_seconds": round(idle_s, 1),
            "lifecycles": dict(Counter(">".join(t.phases) for t in tracks).most_common()),
            "running_written_by": dict(Counter(t.running_by for t in tracks if t.running_by)),
        },
        "reconciles_per_runner": {
            name: round(total / created, 2) if created else 0.0
            for name, total in sorted(teardown.reconciles.items())
        },
        # What woke each controller, per runner, by `watch event fields`.
        "wakes_per_runner": {
            name: {
                cause: round(total / created, 2) if created else 0.0
                for cause, total in sorted(causes.items(), key=lambda item: -item[1])
            }
            for name, causes in sorted(teardown.wakes.items())
        },
        "api_calls_per_job": {
            "kubernetes": per_job(sum(kube_requests.values())),
            "kubernetes_by_identity": {
                name: per_job(sum(n for (who, _), n in kube_requests.items() if who == user))
                for name, user in identities
            },
            # Per identity, by `verb resource[/subresource]`: where the requests go.
            "kubernetes_by_request": {
                name: {
                    request: per_job(n)
                    for (who, request), n in sorted(kube_requests.items())
                    if who == user
                }
                for name, user in identities
            },
            "actions": round(len(gh.state.requests) / enqueued, 2) if enqueued else 0.0,
        },
        "leftovers": {"kubernetes": teardown.kubernetes, "actions": teardown.actions},
        "components": {
            "exit_codes": teardown.exit_codes,
            "crash": crash,
            "listener_identity": observer.listener_user,
        },
        "invariant_violations": observer.violations,
    }
    report["ok"] = failures(report) == []
    return report


def failures(report: dict[str, Any]) -> list[str]:
    """Why the run failed, one line each; empty for a clean run."""
    found = []
    if report["jobs"]["lost"]:
        found.append(f"{report['jobs']['lost']} job(s) did not complete")
    if report["runners"]["killed_while_busy"]:
        found.append(f"{report['runners']['killed_while_busy']} busy runner(s) killed")
    if report["invariant_violations"]:
        found.append(f"{len(report['invariant_violations'])} invariant violation(s)")
    for side in ("kubernetes", "actions"):
        if report["leftovers"][side]:
            found.append(f"left over in {side}: {', '.join(report['leftovers'][side][:5])}")
    crash = report["components"]["crash"]
    if crash:
        found.append(f"{crash['component']} exited with code {crash['exit_code']}")
    crashed = crash["component"] if crash else None
    for name, code in report["components"]["exit_codes"].items():
        if code not in (0, None) and name != crashed:
            found.append(f"{name} stopped with exit code {code}")
    if report["interrupted"]:
        found.append("interrupted")
    drain = report.get("drain")
    if drain and drain["error"]:
        found.append(f"drain of {drain['node'] or 'a node'}: {drain['error']}")
    return found


def summary_table(report: dict[str, Any]) -> Table:
    jobs, runners = report["jobs"], report["runners"]
    queue, scale_up = report["queue_time_s"], report["scale_up_latency_s"]
    calls = report["api_calls_per_job"]
    table = Table(title="gha-sandbox summary (times in simulated seconds)", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("jobs done / failed / lost", f"{jobs['completed']} / {jobs['failed']} / {jobs['lost']}"),
        ("queue time p50 / p95 / max", f"{queue['p50']} / {queue['p95']} / {queue['max']}"),
        (
            "scale-up latency p50 / p95 / max",
            f"{scale_up['p50']} / {scale_up['p95']} / {scale_up['max']}",
        ),
        ("runners created / max at once", f"{runners['created']} / {runners['max_concurrent']}"),
        ("runner utilisation", f"{runners['utilisation']:.0%}"),
        ("idle runner-seconds", f"{runners['idle_runner_seconds']:.0f}"),
    ]
    rows += [
        (f"stage {name} p50 / p95", f"{split['p50']} / {split['p95']}")
        for name, split in report["stage_split_s"].items()
    ]
    rows.append(("jobs that waited at maxRunners", f"{report['jobs_waited_at_max_runners']}"))
    rows += [
        (f"reconciles per runner ({name})", f"{value}")
        for name, value in report["reconciles_per_runner"].items()
    ]
    rows += [
        ("Kubernetes requests per job", f"{calls['kubernetes']}"),
        (
            "  of which controller / listener",
            " / ".join(
                f"{calls['kubernetes_by_identity'][who]}" for who in ("controller", "listener")
            ),
        ),
        ("Actions requests per job", f"{calls['actions']}"),
        ("busy runners killed", f"{runners['killed_while_busy']}"),
        (
            "jobs explained / busy pods protected",
            "{explained_jobs_per_job:.2f} / {busy_protected_per_busy_runner:.2f}".format(
                **report["nothing_skipped"]
            ),
        ),
        ("invariant violations", f"{len(report['invariant_violations'])}"),
        (
            "leftovers (Kubernetes / Actions)",
            f"{len(report['leftovers']['kubernetes'])} / {len(report['leftovers']['actions'])}",
        ),
    ]
    drain = report.get("drain")
    if drain:
        rows += [
            (f"drain of {drain['node']} at {drain['at_s']} s", f"{drain['time_s']} s"),
            (
                "  pods evicted / evictions refused",
                f"{drain['pods_evicted']} / {drain['evictions_refused']}",
            ),
            (
                "  jobs on evicted runners / lost",
                f"{drain['jobs_on_evicted_runners']} / {drain['jobs_lost']}",
            ),
        ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def print_summary(console: Console, report: dict[str, Any]) -> None:
    console.print(summary_table(report))
    for violation in report["invariant_violations"]:
        console.print(
            f"invariant violated: {violation['invariant']}: {violation['object']}: "
            f"{violation['detail']} (at {violation['at_s']} s)"
        )
    reasons = failures(report)
    console.print("result: " + ("ok" if not reasons else "FAILED: " + "; ".join(reasons)))


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n")


def write_plot(path: Path, observer: Observer, *, max_runners: int, title: str) -> None:
    """Queued jobs, busy and idle runners (stacked) and desired replicas over time; beside it,
    each stage's p50 and p95 of the jobs' waits (docs/job-timeline.md#stages)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    samples = observer.samples
    t = [s.t for s in samples]
    fig, (ax, stages_ax) = plt.subplots(
        1, 2, figsize=(13, 4.8), dpi=110, gridspec_kw={"width_ratios": [3, 1]}
    )
    ax.stackplot(
        t,
        [s.busy for s in samples],
        [s.idle for s in samples],
        labels=["busy runners", "idle runners"],
        colors=["#2e7d32", "#a5d6a7"],
        step="post",
    )
    ax.step(
        t, [s.desired for s in samples], where="post", color="#1565c0", label="desired replicas"
    )
    ax.step(t, [s.waiting for s in samples], where="post", color="#c62828", label="queued jobs")
    ax.axhline(max_runners, color="#555555", linestyle="--", linewidth=1, label="maxRunners")
    ax.set_xlabel("simulated seconds")
    ax.set_ylabel("count")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    split = stage_split(observer)
    rows = list(range(len(split)))
    stages_ax.barh(rows, [v["p95"] for v in split.values()], color="#ffcc80", label="p95")
    stages_ax.barh(rows, [v["p50"] for v in split.values()], color="#ef6c00", label="p50")
    stages_ax.set_yticks(rows, list(split))
    stages_ax.invert_yaxis()
    stages_ax.set_xlabel("simulated seconds per job")
    stages_ax.set_title("where the wait went", fontsize=10)
    stages_ax.legend(loc="lower right", fontsize=8)
    stages_ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
