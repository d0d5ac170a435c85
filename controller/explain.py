"""`gha-controller explain job <id>` / `explain runner <name>`: where a job's wait went
(docs/job-timeline.md).

Reads what the cluster holds: the `JobTimeline` Events (kept for the Event TTL after the runner
is gone) and, for a runner still there, its `status.timeline`. Prints each stage and the one that
dominated, with why. Read-only.

Exit codes: 0 printed, 1 no timeline found (or a Kubernetes error), 2 bad arguments or kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import NoReturn

from controller.commands import user_api
from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.errors import KubeError
from shared.kube.objects import EVENT, Objects
from shared.kube.views import metadata_of, status_of
from shared.typedefs import JSONDict

PROG = "gha-controller explain"
EXPLAIN = "explain"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(prog=PROG, description="Explain where a job's wait went, stage by stage.")
    p.add_argument("what", choices=("job", "runner"))
    p.add_argument("id", help="the job id (status.jobId) or the EphemeralRunner's name")
    p.add_argument("-n", "--namespace", default=None, help="default: every namespace")
    p.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG, then in-cluster")
    p.add_argument("--context", default=None)
    return p


def _matches(moments: JSONDict, runner: str, *, what: str, ident: str) -> bool:
    if what == "job":
        return str(moments.get(tl.JOB_ID, "")) == ident
    return runner == ident


async def find_timeline(
    objects: Objects, *, what: str, ident: str, namespace: str | None
) -> tl.Timeline | None:
    """The job's timeline: from its Event when there is one (the controller's, complete), else
    from the runner's status (the listener's part and the moments the controller wrote)."""
    events = (await objects.list(EVENT, namespace)).get("items") or []
    for event in sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""), reverse=True):
        if event.get("reason") != tl.EVENT_REASON:
            continue
        annotation = (metadata_of(event).get("annotations") or {}).get(tl.EVENT_ANNOTATION)
        if not annotation:
            continue
        timeline = tl.Timeline.from_json(str(annotation))
        runner = str((event.get("involvedObject") or {}).get("name", ""))
        if _matches(timeline.moments, runner, what=what, ident=ident):
            return timeline
    runners = (await objects.list(EPHEMERAL_RUNNER, namespace)).get("items") or []
    for runner_obj in runners:
        moments = dict(status_of(runner_obj).get(tl.TIMELINE_FIELD) or {})
        name = str(metadata_of(runner_obj).get("name", ""))
        if moments and _matches(moments, name, what=what, ident=ident):
            moments.update(tl.cluster_moments(runner_obj, None))
            moments[tl.RUNNER] = name
            return tl.Timeline(moments)
    return None


def render(timeline: tl.Timeline) -> str:
    """The report `explain` prints."""
    moments = timeline.moments
    lines = [
        f"job {moments.get(tl.JOB_ID, '?')} on runner {moments.get(tl.RUNNER, '?')}",
        f"  offered {moments.get(tl.RECEIVED, '?')}, started {moments.get(tl.JOB_STARTED, '?')}",
    ]
    for stage in timeline.stages():
        lines.append(f"  {stage.name:<16}{stage.seconds:>9.1f} s")
    lines.append(f"  {'total':<16}{timeline.total_seconds():>9.1f} s")
    lines.append(f"dominated by: {timeline.explanation()}")
    lines.append(f"GitHub clock vs the listener's: {moments.get(tl.SKEW, '?')} s")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    api = await user_api(PROG, args.kubeconfig, args.context)
    if api is None:
        return 2
    async with api:
        try:
            timeline = await find_timeline(
                Objects(api), what=args.what, ident=args.id, namespace=args.namespace
            )
        except KubeError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1
    if timeline is None:
        print(f"{PROG}: no timeline recorded for {args.what} {args.id}", file=sys.stderr)
        return 1
    print(render(timeline))
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run(args))
