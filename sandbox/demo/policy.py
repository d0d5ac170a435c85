"""`gha-sandbox demo --policy FILE [--policy FILE2]`: one workload, same seed, run under two
capacity policies one after the other, compared side by side (docs/sandbox.md#policy).

A policy file holds the fields of an AutoscalingRunnerSet's `spec.scalingPolicy`
(docs/policies.md), in YAML or JSON. The second policy defaults to none: ARC's formula.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from sandbox.demo.cluster import SystemOptions
from sandbox.demo.observe import Observer
from sandbox.demo.report import write_report
from sandbox.demo.workload import JobSpec
from shared.api.timeline import STAGES
from shared.policy import PolicyState, ScalingPolicy, decide, utc_now

BASELINE = "none (ARC)"
# Holds the policy counts in seconds; the listener reads them on its own (real) clock, so the
# demo divides them by the speed-up as it does the workload's times.
TIMED_FIELDS = ("warmTailSeconds", "scaleDownDelaySeconds")

Run = Callable[..., Awaitable[int]]
"""`cli.run_demo`: passed in, so that this module and the CLI do not import each other."""


class PolicyFileError(Exception):
    """A policy file that cannot be read or is not a valid policy; one line, naming the file."""


@dataclass(frozen=True, slots=True)
class Contender:
    name: str
    policy: ScalingPolicy | None


def load_policy(path: Path, *, min_runners: int, max_runners: int) -> ScalingPolicy:
    """The policy in `path`, checked with the rules the listener and the controller apply."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise PolicyFileError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"{path}: not YAML or JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise PolicyFileError(f"{path}: must hold a mapping of scalingPolicy fields")
    try:
        policy = ScalingPolicy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
        ).lstrip(".")
        message = first["msg"].removeprefix("Value error, ")
        raise PolicyFileError(
            f"{path}: {where}: {message}" if where else f"{path}: {message}"
        ) from None
    problems = policy.bound_problems(min_runners=min_runners, max_runners=max_runners)
    if problems:
        raise PolicyFileError(f"{path}: {problems[0]}")
    return policy


def contenders(args: argparse.Namespace) -> list[Contender]:
    """The two policies of `--policy` (the second ARC's formula unless given), each named after
    its file."""
    found = [
        Contender(
            path.stem,
            load_policy(path, min_runners=args.min_runners, max_runners=args.max_runners),
        )
        for path in args.policy
    ]
    if len(found) == 1:
        found.append(Contender(BASELINE, None))
    if found[0].name == found[1].name:
        found = [Contender(str(path), c.policy) for path, c in zip(args.policy, found, strict=True)]
    return found


def applied(policy: ScalingPolicy | None, speedup: float) -> dict[str, Any] | None:
    """What the listener gets: the policy with its hold times compressed like the workload's.
    A schedule's window is read on the real clock (its cron and time zone), so it is kept."""
    if policy is None:
        return None
    wire = policy.to_wire()
    for name in TIMED_FIELDS:
        if name in wire:
            wire[name] = math.ceil(int(str(wire[name])) / speedup)
    return wire


def resting_count(options: SystemOptions) -> int:
    """The count the listener rests at with no job: minRunners, or what the policy keeps."""
    if options.scaling_policy is None:
        return options.min_runners
    decision = decide(
        assigned_jobs=0,
        min_runners=options.min_runners,
        max_runners=options.max_runners,
        policy=ScalingPolicy.model_validate(options.scaling_policy),
        state=PolicyState(),
        now=utc_now(),
    )
    return decision.resting


async def compare(
    args: argparse.Namespace, jobs: list[JobSpec], info: dict[str, Any], *, run: Run
) -> int:
    """Run the workload under each policy, then print, report and plot both."""
    console = Console()
    runs: list[dict[str, Any]] = []
    observers: list[Observer] = []
    code = 0
    for contender in contenders(args):
        console.print(f"policy {contender.name}:", highlight=False)
        outcome: list[tuple[dict[str, Any], Observer]] = []
        one = argparse.Namespace(
            **vars(args) | {"report": None, "plot": None, "policy": [str(p) for p in args.policy]}
        )
        given = applied(contender.policy, args.speedup)
        code = max(code, await run(one, jobs, info, scaling_policy=given, outcome=outcome))
        if not outcome or outcome[0][0]["interrupted"]:
            return code
        report, observer = outcome[0]
        runs.append(
            {
                "name": contender.name,
                "policy": contender.policy.to_wire() if contender.policy else None,
                "applied_policy": given,
                "report": report,
            }
        )
        observers.append(observer)
    console.print(comparison_table(runs))
    if args.report:
        write_report(args.report, {"workload": info, "runs": runs})
    if args.plot:
        write_comparison_plot(args.plot, runs, observers, max_runners=args.max_runners)
    return code


def _rows(report: dict[str, Any]) -> list[str]:
    queue, runners = report["queue_time_s"], report["runners"]
    return [
        f"{queue['p50']}",
        f"{queue['p95']}",
        f"{queue['max']}",
        f"{runners['idle_runner_seconds']:.0f}",
        f"{runners['busy_runner_seconds']:.0f}",
        f"{runners['utilisation']:.0%}",
        f"{runners['created']}",
        f"{runners['max_desired']}",
        f"{len(report['invariant_violations'])}",
        "ok" if report["ok"] else "FAILED",
        *(f"{split['p50']} / {split['p95']}" for split in report["stage_split_s"].values()),
    ]


MEASURES = [
    "queue time p50 (s)",
    "queue time p95 (s)",
    "queue time max (s)",
    "idle runner-seconds",
    "busy runner-seconds",
    "runner utilisation",
    "runners created",
    "most replicas asked for",
    "invariant violations",
    "result",
    # Which stage of the jobs' waits a policy shortens (docs/job-timeline.md#stages).
    *(f"stage {stage} p50 / p95 (s)" for stage in STAGES),
]


def comparison_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(
        title="gha-sandbox policy comparison (same workload, times in simulated seconds)",
        title_justify="left",
    )
    table.add_column("measure")
    for run in runs:
        table.add_column(run["name"], justify="right")
    columns = [_rows(run["report"]) for run in runs]
    for index, measure in enumerate(MEASURES):
        table.add_row(measure, *(column[index] for column in columns))
    return table


def write_comparison_plot(
    path: Path, runs: list[dict[str, Any]], observers: list[Observer], *, max_runners: int
) -> None:
    """One panel per policy, same axes: busy and idle runners (stacked), desired replicas and
    queued jobs, with each run's queue time and idle runner-seconds in its panel's title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(
        len(runs), 1, figsize=(10, 3.4 * len(runs)), dpi=110, sharex=True, sharey=True
    )
    top = max(
        [max_runners]
        + [max(s.desired, s.waiting, s.busy + s.idle) for o in observers for s in o.samples]
    )
    for ax, run, observer in zip(axes, runs, observers, strict=True):
        samples = observer.samples
        t = [s.t for s in samples]
        ax.stackplot(
            t,
            [s.busy for s in samples],
            [s.idle for s in samples],
            labels=["busy runners", "idle runners"],
            colors=["#2e7d32", "#a5d6a7"],
            step="post",
        )
        ax.step(t, [s.desired for s in samples], where="post", color="#1565c0",
                label="desired replicas")  # fmt: skip
        ax.step(t, [s.waiting for s in samples], where="post", color="#c62828",
                label="queued jobs")  # fmt: skip
        ax.axhline(max_runners, color="#555555", linestyle="--", linewidth=1, label="maxRunners")
        queue, runners = run["report"]["queue_time_s"], run["report"]["runners"]
        ax.set_title(
            f"{run['name']}: queue time p50 {queue['p50']} s, p95 {queue['p95']} s, "
            f"max {queue['max']} s; idle runner-seconds {runners['idle_runner_seconds']:.0f}",
            fontsize=10,
            loc="left",
        )
        ax.set_ylabel("count")
        ax.set_xlim(left=0)
        ax.set_ylim(0, top * 1.05)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("simulated seconds")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with one line (exit 2) for more than two policies or a bad policy file."""
    if len(args.policy) > 2:
        parser.error("--policy takes at most two files")
    try:
        contenders(args)
    except PolicyFileError as exc:
        parser.exit(2, f"gha-sandbox demo: {exc}\n")
