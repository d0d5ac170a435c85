"""`gha-controller explain job <id> [<job name>]` / `explain runner <name>`: where a job's wait
went (docs/job-timeline.md).

A job is found by its id (`status.jobId`) or by what a user sees of it in GitHub: the workflow
run's id (the number in the run's URL), with the job's name when the run has several jobs. Reads
what the cluster holds: the `JobTimeline` Events (kept for the Event TTL after the runner is
gone) and, for a runner still there, its `status.timeline`. Prints each stage and the one that
dominated, with why, in sentences. Read-only.

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
    p.add_argument(
        "id",
        help="for a job its id (status.jobId) or its workflow run's id (the number in the run's "
        "URL on GitHub); for a runner the EphemeralRunner's name",
    )
    p.add_argument(
        "name", nargs="?", default=None, help="the job's name in the run, as GitHub shows it"
    )
    p.add_argument("-n", "--namespace", default=None, help="default: every namespace")
    p.add_argument("--kubeconfig", default=None, help="default: KUBECONFIG, then in-cluster")
    p.add_argument("--context", default=None)
    return p


def _matches(
    moments: JSONDict, runner: str, *, what: str, ident: str, name: str | None = None
) -> bool:
    if what == "runner":
        return runner == ident
    found = ident in (str(moments.get(tl.JOB_ID, "")), str(moments.get(tl.WORKFLOW_RUN_ID, "")))
    return found and (name is None or moments.get(tl.JOB_NAME) == name)


async def find_timelines(
    objects: Objects,
    *,
    what: str,
    ident: str,
    namespace: str | None,
    name: str | None = None,
) -> list[tl.Timeline]:
    """Every matching job's timeline, newest first (a workflow run may have several jobs): from
    its Event when there is one (the controller's, complete), else from the runner's status (the
    listener's part and the moments the controller wrote)."""
    found: dict[str, tl.Timeline] = {}
    events = (await objects.list(EVENT, namespace)).get("items") or []
    for event in sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""), reverse=True):
        if event.get("reason") != tl.EVENT_REASON:
            continue
        annotation = (metadata_of(event).get("annotations") or {}).get(tl.EVENT_ANNOTATION)
        if not annotation:
            continue
        timeline = tl.Timeline.from_json(str(annotation))
        runner = str((event.get("involvedObject") or {}).get("name", ""))
        if _matches(timeline.moments, runner, what=what, ident=ident, name=name):
            found.setdefault(_job_of(timeline, runner), timeline)
    runners = (await objects.list(EPHEMERAL_RUNNER, namespace)).get("items") or []
    for runner_obj in runners:
        status = status_of(runner_obj)
        moments = dict(status.get(tl.TIMELINE_FIELD) or {})
        if not moments:
            continue
        runner_name = str(metadata_of(runner_obj).get("name", ""))
        # The runner's own job fields, for a timeline an older listener wrote without them.
        for key in (tl.WORKFLOW_RUN_ID, tl.JOB_NAME):
            if key not in moments and status.get(key):
                moments[key] = str(status[key])
        if _matches(moments, runner_name, what=what, ident=ident, name=name):
            moments.update(tl.cluster_moments(runner_obj, None))
            moments[tl.RUNNER] = runner_name
            found.setdefault(_job_of(tl.Timeline(moments), runner_name), tl.Timeline(moments))
    return list(found.values())


def _job_of(timeline: tl.Timeline, runner: str) -> str:
    return str(timeline.moments.get(tl.JOB_ID) or runner)


async def find_timeline(
    objects: Objects, *, what: str, ident: str, namespace: str | None
) -> tl.Timeline | None:
    """The newest matching job's timeline, or None."""
    found = await find_timelines(objects, what=what, ident=ident, namespace=namespace)
    return found[0] if found else None


def render(timeline: tl.Timeline) -> str:
    """The report `explain` prints: every line a sentence."""
    moments = timeline.moments
    job = str(moments.get(tl.JOB_ID) or "(id unknown)")
    seen = []
    if moments.get(tl.JOB_NAME):
        seen.append(f'"{moments[tl.JOB_NAME]}"')
    if moments.get(tl.WORKFLOW_RUN_ID):
        seen.append(f"of workflow run {moments[tl.WORKFLOW_RUN_ID]}")
    about = f" ({' '.join(seen)})" if seen else ""
    lines = [f"Job {job}{about} ran on runner {moments.get(tl.RUNNER) or '(unknown)'}."]
    offered, started = moments.get(tl.RECEIVED), moments.get(tl.JOB_STARTED)
    if offered and started:
        lines.append(f"It was offered at {offered} and started at {started}.")
    elif started:
        lines.append(f"It started at {started}; when it was offered is not known.")
    for stage in timeline.stages():
        lines.append(f"  The {stage.name} stage took {stage.seconds:.1f} s.")
    lines.append(f"In all it waited {timeline.total_seconds():.1f} s.")
    lines.append(f"Most of the wait: {timeline.explanation()}.")
    skew = moments.get(tl.SKEW)
    try:
        seconds = float(str(skew))
    except ValueError:
        lines.append(
            "GitHub's clock was not measured against the listener's (the listener did not see "
            "the job offered), so GitHub's times are taken as the listener's."
        )
    else:
        lines.append(
            f"GitHub's clock read {seconds:.3f} s behind the listener's (the job offer's "
            "delivery included)."
        )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    api = await user_api(PROG, args.kubeconfig, args.context)
    if api is None:
        return 2
    async with api:
        try:
            timelines = await find_timelines(
                Objects(api),
                what=args.what,
                ident=args.id,
                namespace=args.namespace,
                name=args.name,
            )
        except KubeError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1
    if not timelines:
        named = f' named "{args.name}"' if args.name else ""
        print(f"{PROG}: no timeline recorded for {args.what} {args.id}{named}", file=sys.stderr)
        return 1
    print("\n\n".join(render(timeline) for timeline in timelines))
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run(args))
