"""The controller's part of a job's timeline (docs/job-timeline.md).

* The cluster's moments of a runner (created, pod created, scheduled, container started) ride
  along in the `ready` status write the reconciler makes anyway, so the listener finds them on
  the runner it reads at JobStarted.
* Once the listener has written the job's timeline, the first pass that sees it (busy,
  finished or being deleted: docs/reconcilers.md#under-lag) posts one Normal Event `JobTimeline`
  on the EphemeralRunner, which keeps it: its message is the stage split for `kubectl describe`, its
  annotation the machine-readable moments for `gha-controller explain`. The Event outlives the
  runner for the API server's Event TTL (`--event-ttl`, 1 h by default): that is the retention
  window. One Event per runner per controller process: the only request this adds.
* Each reconcile pass's span (the runtime's `reconcile ephemeralrunner`) carries the runner's
  name and, once the listener has recorded the job on the runner, the job id, and is then a
  child of the job's root span: the passes from JobStarted on are in the job's trace.
"""

from __future__ import annotations

import dataclasses

from opentelemetry.trace import Tracer

from controller.ephemeralrunner.rules import PodOutcome
from controller.ephemeralrunner.steps import Step
from controller.runtime import Recall, Request
from controller.runtime.controller import PassSpan
from controller.runtime.events import EventRecorder
from shared.api import timeline as tl
from shared.kube.views import metadata_of, status_of
from shared.typedefs import JSONDict


def with_cluster_moments(outcome: PodOutcome, runner: JSONDict, pod: JSONDict) -> PodOutcome:
    """`outcome` with the cluster's moments added to its status write when that makes the
    runner ready and the runner does not hold them yet."""
    if outcome.status.get("ready") is not True:
        return outcome
    known = status_of(runner).get(tl.TIMELINE_FIELD) or {}
    moments = tl.cluster_moments(runner, pod)
    if tl.CONTAINER_STARTED in known or tl.CONTAINER_STARTED not in moments:
        return outcome
    return dataclasses.replace(outcome, status={**outcome.status, tl.TIMELINE_FIELD: moments})


async def record_timeline(
    runner: JSONDict,
    pod: JSONDict | None,
    *,
    memory: Recall,
    events: EventRecorder,
    tracer: Tracer,
) -> None:
    """The `JobTimeline` Event, once the listener has written the job's part (`memory`: the
    runner's `Recall`), and the spans of the cluster's stages in the job's trace."""
    moments = status_of(runner).get(tl.TIMELINE_FIELD) or {}
    if tl.JOB_STARTED not in moments or not memory.do_once(Step.TIMELINE_RECORDED):
        return
    joined = {**moments, **tl.cluster_moments(runner, pod), tl.RUNNER: metadata_of(runner)["name"]}
    timeline = tl.Timeline(joined)
    timeline.trace_spans(tracer, name="runner", stages=tl.CONTROLLER_STAGES)
    await events.normal(
        runner,
        reason=tl.EVENT_REASON,
        message=timeline.describe(),
        annotations={tl.EVENT_ANNOTATION: timeline.to_json()},
    )


def pass_span(runner: JSONDict | None, request: Request, tracer: Tracer) -> PassSpan:
    """The span of a pass on `runner` (from the cache): in its job's trace once the job is
    known, named by the runner either way."""
    job = tl.job_of(runner)
    if not job:
        return PassSpan(tracer, attributes={"gha.runner": request.name})
    return PassSpan(
        tracer,
        parent=tl.job_context(job),
        attributes={"gha.runner": request.name, "gha.job_id": job},
    )
