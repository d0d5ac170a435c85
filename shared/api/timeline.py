"""A job's timeline: the moments between "queued" and "running" and the stages between them.

The shape shared by the listener (which writes the job's moments into the EphemeralRunner's
`status.timeline`), the controller (which adds the cluster's moments and keeps the result in an
Event) and `gha-controller explain` (which reads it back). Definitions: docs/job-timeline.md.

`status.timeline` maps moment names to RFC 3339 times, plus a few plain strings (`capacity`,
`githubSkewSeconds`). Every moment is converted to the listener's clock before it is written:
GitHub's times are shifted by the skew measured when the job was offered (`github_to_local`),
the cluster's times are taken as they are (same cluster, one clock within a second).

Stages are the gaps between consecutive moments, in the order of `BOUNDARIES`. A moment that is
missing is skipped (its stage merges into the next one), and a moment earlier than the one before
it is clamped to it, so no stage is negative: a runner created before its job was offered (an
idle runner taking it) makes the cluster's stages 0 for that job.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, TraceFlags, Tracer

from shared.typedefs import JSONDict
from shared.wire import DecodeError, decode_json

TIMELINE_FIELD = "timeline"
"""The EphemeralRunner status field holding the moments."""
EVENT_REASON = "JobTimeline"
"""The reason of the Event that keeps a runner's timeline after the runner is gone."""
EVENT_ANNOTATION = "actions.github.com/job-timeline"
"""The Event annotation holding the timeline as JSON (`Timeline.to_json`)."""

# Moments, in listener-clock RFC 3339.
RECEIVED = "jobOffered"
"""The listener received the job's JobAvailable (without one: GitHub's scale set assign time)."""
DESIRED_WRITTEN = "desiredWritten"
"""The listener's first EphemeralRunnerSet patch after that."""
RUNNER_CREATED = "runnerCreated"
"""The EphemeralRunner's creationTimestamp."""
POD_CREATED = "podCreated"
POD_SCHEDULED = "podScheduled"
"""The pod's PodScheduled condition turned True."""
CONTAINER_STARTED = "containerStarted"
"""The runner container's state.running.startedAt."""
RUNNER_ASSIGNED = "runnerAssigned"
"""GitHub's runnerAssignTime, shifted to the listener's clock."""
JOB_STARTED = "jobStarted"
"""The listener received the job's JobStarted."""

CLUSTER_MOMENTS = (RUNNER_CREATED, POD_CREATED, POD_SCHEDULED, CONTAINER_STARTED)

CAPACITY = "capacity"
"""Set when the job waited for capacity: `<desired>/<maxRunners> maxRunners` or
`<desired>/<assigned> policy` at the listener's first patch after the job was offered."""
SKEW = "githubSkewSeconds"
"""The listener's receive time of JobAvailable minus GitHub's scaleSetAssignTime, in seconds."""
QUEUED = "queued"
"""GitHub's queueTime, shifted to the listener's clock (informational: not a stage boundary)."""
JOB_ID = "jobId"
WORKFLOW_RUN_ID = "workflowRunId"
"""The workflow run's id, the number in the run's URL on GitHub (as the runner's status field)."""
JOB_NAME = "jobDisplayName"
"""The job's name as GitHub shows it in the run (as the runner's status field)."""
RUNNER = "runner"

# Stage names (the `stage` label of gha_job_stage_duration_seconds).
STAGE_LISTENER = "listener"
STAGE_CAPACITY = "capacity"
STAGE_CONTROLLER = "controller"
STAGE_SCHEDULING = "scheduling"
STAGE_CONTAINER_START = "container_start"
STAGE_REGISTRATION = "registration"
STAGE_JOB_START = "job_start"

STAGES = (
    STAGE_LISTENER,
    STAGE_CAPACITY,
    STAGE_CONTROLLER,
    STAGE_SCHEDULING,
    STAGE_CONTAINER_START,
    STAGE_REGISTRATION,
    STAGE_JOB_START,
)

LISTENER_STAGES = (STAGE_LISTENER, STAGE_CAPACITY, STAGE_REGISTRATION, STAGE_JOB_START)
"""The stages the listener's spans cover; the controller's cover the others."""
CONTROLLER_STAGES = (STAGE_CONTROLLER, STAGE_SCHEDULING, STAGE_CONTAINER_START)

BOUNDARIES: tuple[tuple[str, str], ...] = (
    (DESIRED_WRITTEN, STAGE_LISTENER),
    (RUNNER_CREATED, STAGE_CONTROLLER),  # STAGE_CAPACITY when the job waited for capacity
    (POD_CREATED, STAGE_CONTROLLER),
    (POD_SCHEDULED, STAGE_SCHEDULING),
    (CONTAINER_STARTED, STAGE_CONTAINER_START),
    (RUNNER_ASSIGNED, STAGE_REGISTRATION),
    (JOB_STARTED, STAGE_JOB_START),
)
"""Each moment after RECEIVED and the stage that ends at it."""

_WHY = {
    STAGE_LISTENER: "the listener took long to write the desired count (is it healthy?)",
    STAGE_CONTROLLER: "the controller took long to create the runner and its pod "
    "(see gha_controller_* metrics)",
    STAGE_SCHEDULING: "the pod waited for a node (cluster capacity, quotas, affinity)",
    STAGE_CONTAINER_START: "the runner container took long to start (image pull, init containers)",
    STAGE_REGISTRATION: "the runner took long to register with GitHub and get the job assigned",
    STAGE_JOB_START: "the runner took long to start the job after GitHub assigned it",
}


def trace_id_of(job_id: str) -> int:
    """The trace id of a job, the same in every process: the first 16 bytes of
    sha256("gha-job/<job id>")."""
    return int.from_bytes(hashlib.sha256(f"gha-job/{job_id}".encode()).digest()[:16], "big")


def _span_id_of(job_id: str) -> int:
    """The id of the job's (not exported) root span, parent of every process's spans."""
    return int.from_bytes(hashlib.sha256(f"gha-job/{job_id}".encode()).digest()[16:24], "big")


def job_context(job_id: str) -> Context:
    """A context whose span is the job's root (never exported): spans started in it are in the
    job's trace, whichever process makes them."""
    return trace.set_span_in_context(
        trace.NonRecordingSpan(
            SpanContext(
                trace_id=trace_id_of(job_id),
                span_id=_span_id_of(job_id),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        )
    )


def job_of(runner: JSONDict | None) -> str:
    """The id of the job the listener recorded on a runner's timeline ("" before its
    JobStarted)."""
    status = (runner or {}).get("status") or {}
    return str((status.get(TIMELINE_FIELD) or {}).get(JOB_ID) or "")


def _ns(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1e9)


def format_moment(moment: datetime) -> str:
    """RFC 3339 in UTC with milliseconds."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def github_to_local(github_time: datetime, skew: timedelta) -> datetime:
    """One of GitHub's timestamps on the listener's clock."""
    aware = github_time if github_time.tzinfo else github_time.replace(tzinfo=UTC)
    return aware + skew


def cluster_moments(runner: JSONDict, pod: JSONDict | None) -> JSONDict:
    """The cluster's moments of a runner and its pod, as far as they are known."""
    moments: JSONDict = {}
    created = (runner.get("metadata") or {}).get("creationTimestamp")
    if created:
        moments[RUNNER_CREATED] = format_moment(parse_moment(str(created)))
    if pod is None:
        return moments
    pod_created = (pod.get("metadata") or {}).get("creationTimestamp")
    if pod_created:
        moments[POD_CREATED] = format_moment(parse_moment(str(pod_created)))
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        scheduled = condition.get("type") == "PodScheduled" and condition.get("status") == "True"
        if scheduled and condition.get("lastTransitionTime"):
            moments[POD_SCHEDULED] = format_moment(
                parse_moment(str(condition["lastTransitionTime"]))
            )
    for container in status.get("containerStatuses") or []:
        if container.get("name") != "runner":
            continue
        started = ((container.get("state") or {}).get("running") or {}).get("startedAt")
        if started:
            moments[CONTAINER_STARTED] = format_moment(parse_moment(str(started)))
    return moments


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    seconds: float
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True, slots=True)
class Timeline:
    """A job's moments (listener clock) and what the listener knew about capacity."""

    moments: JSONDict

    @property
    def capacity(self) -> str:
        return str(self.moments.get(CAPACITY) or "")

    def stages(self) -> list[Stage]:
        """Every stage with its duration; a stage whose end is unknown is not listed (its time
        is in the next known one)."""
        start_value = self.moments.get(RECEIVED)
        if not isinstance(start_value, str):
            return []
        previous = parse_moment(start_value)
        spans: dict[str, tuple[datetime, datetime]] = {}
        for moment, stage in BOUNDARIES:
            value = self.moments.get(moment)
            if not isinstance(value, str):
                continue
            at = max(parse_moment(value), previous)
            if moment == RUNNER_CREATED and self.capacity:
                stage = STAGE_CAPACITY
            spans[stage] = (spans[stage][0] if stage in spans else previous, at)
            previous = at
        return [
            Stage(name, (spans[name][1] - spans[name][0]).total_seconds(), *spans[name])
            for name in STAGES
            if name in spans
        ]

    def trace_spans(self, tracer: Tracer, *, name: str, stages: Collection[str]) -> None:
        """Spans in the job's trace (`trace_id_of`): one named `name` over `stages`, with a
        child per stage, at the stages' own times. The listener and the controller each call
        this for the stages they see; a tracing backend shows them in one trace."""
        job = str(self.moments.get(JOB_ID) or "")
        chosen = [stage for stage in self.stages() if stage.name in stages]
        if not job or not chosen:
            return
        parent = job_context(job)
        attributes = {"gha.job_id": job, "gha.runner": str(self.moments.get(RUNNER) or "")}
        if self.capacity:
            attributes["gha.capacity"] = self.capacity
        outer = tracer.start_span(
            name, context=parent, start_time=_ns(chosen[0].start), attributes=attributes
        )
        inside = trace.set_span_in_context(outer)
        for stage in chosen:
            span = tracer.start_span(
                f"stage {stage.name}",
                context=inside,
                start_time=_ns(stage.start),
                attributes={"gha.stage": stage.name, "gha.job_id": job},
            )
            span.end(end_time=_ns(stage.end))
        outer.end(end_time=_ns(chosen[-1].end))

    def clamped(self) -> int:
        """How many known moments were earlier than the known one before them, and so taken as
        equal to it by `stages`."""
        value = self.moments.get(RECEIVED)
        if not isinstance(value, str):
            return 0
        count, previous = 0, parse_moment(value)
        for moment, _ in BOUNDARIES:
            value = self.moments.get(moment)
            if isinstance(value, str):
                at = parse_moment(value)
                count += at < previous
                previous = max(at, previous)
        return count

    def total_seconds(self) -> float:
        return sum(stage.seconds for stage in self.stages())

    def dominant(self) -> Stage | None:
        stages = self.stages()
        return max(stages, key=lambda stage: stage.seconds) if stages else None

    def explanation(self) -> str:
        """The dominating stage and why, one line."""
        top = self.dominant()
        if top is None:
            return "no timeline recorded"
        if top.name == STAGE_CAPACITY:
            held, _, by = self.capacity.partition(" ")
            if by == "maxRunners":
                why = f"{held} runners busy; raise maxRunners or see minIdle"
            else:
                why = f"the scaling policy held the set at {held} runners (docs/policies.md)"
            return f"{top.seconds:.0f} s waiting for capacity: {why}"
        return f"{top.seconds:.0f} s in {top.name}: {_WHY[top.name]}"

    def describe(self) -> str:
        """The human-readable Event message: each stage, then the dominating one."""
        parts = [f"{stage.name} {stage.seconds:.1f}s" for stage in self.stages()]
        return (
            f"job {self.moments.get(JOB_ID, '?')} waited {self.total_seconds():.1f}s: "
            + ", ".join(parts)
            + f". {self.explanation()}"
        )

    def to_json(self) -> str:
        return json.dumps(self.moments, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Timeline:
        """The timeline of an Event's annotation; empty when it is not a JSON object (anyone
        who may write Events may write it). The API server caps an object's annotations at
        256 KiB."""
        try:
            loaded = decode_json(text, limit=256 * 2**10, what="the timeline annotation")
        except DecodeError:
            loaded = None
        return cls(loaded if isinstance(loaded, dict) else {})
