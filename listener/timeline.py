"""The listener's part of a job's timeline (docs/job-timeline.md).

The listener notes, in memory, when each job was offered (its JobAvailable arrived), when the
desired count was next written, and whether that count left the job waiting for capacity. On
JobStarted it joins this with GitHub's times and the cluster's moments on the runner it reads
anyway, writes the result in the status patch it makes anyway, and records the stage metrics:
no Kubernetes request is added.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.actions.models import JobAvailable, JobMessageBase, JobStarted
from shared.api import timeline as tl
from shared.typedefs import JSONDict

MAX_PENDING = 10_000
"""Jobs remembered between offer and start; the oldest is forgotten past this (a job started
elsewhere or canceled never sends JobStarted here)."""


@dataclass(slots=True)
class _Offer:
    received: datetime
    skew: timedelta | None
    desired_written: datetime | None = None
    capacity: str = ""


class JobClock:
    def __init__(self, *, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._now = now
        self._offers: OrderedDict[int, _Offer] = OrderedDict()

    def offered(self, jobs: list[JobAvailable]) -> None:
        now = self._now()
        for job in jobs:
            if job.runner_request_id in self._offers:
                continue
            skew = None
            if job.scale_set_assign_time is not None:
                skew = now - tl.github_to_local(job.scale_set_assign_time, timedelta(0))
            self._offers[job.runner_request_id] = _Offer(received=now, skew=skew)
            while len(self._offers) > MAX_PENDING:
                self._offers.popitem(last=False)

    def published(self, *, desired: int, assigned: int, max_runners: int) -> None:
        """The desired count reached the cluster, for `assigned` jobs. The statistics name no
        job: the offers waiting to start are taken as accounted for in the order they came, so
        the count covers a job once `assigned` reaches it (a job is assigned only after the
        listener acquired it, a message or more after its offer). When the count falls short of
        `assigned`, the newest accounted jobs (as many as it falls short) wait for capacity: at
        maxRunners, or held back by the scaling policy."""
        now = self._now()
        pending = list(self._offers.values())
        accounted = pending[: max(assigned, 0)]
        short = max(assigned - desired, 0)
        held_by = "maxRunners" if desired >= max_runners else "policy"
        capacity = f"{desired}/{max_runners if held_by == 'maxRunners' else assigned} {held_by}"
        for index, offer in enumerate(accounted):
            if offer.desired_written is not None:
                continue
            offer.desired_written = now
            if index >= len(accounted) - short:
                offer.capacity = capacity

    def timeline(self, job: JobStarted, runner: JSONDict) -> tl.Timeline:
        """The job's timeline, joined with the cluster's moments of `runner` (its status, as the
        controller wrote it, and its creationTimestamp)."""
        now = self._now()
        offer = self._offers.get(job.runner_request_id)
        skew = offer.skew if offer is not None else None
        if skew is None:
            # No offer seen by this process (restarted, or another listener acquired it):
            # GitHub's clock is taken as the listener's.
            skew = timedelta(0)
        moments: JSONDict = {tl.JOB_ID: job.job_id, tl.SKEW: f"{skew.total_seconds():.3f}"}
        # What a user sees of the job in GitHub, to find it by (`gha-controller explain`).
        if job.workflow_run_id:
            moments[tl.WORKFLOW_RUN_ID] = str(job.workflow_run_id)
        if job.job_display_name:
            moments[tl.JOB_NAME] = job.job_display_name
        if offer is None or offer.skew is None:
            moments[tl.SKEW] = "unmeasured"
        existing = (runner.get("status") or {}).get(tl.TIMELINE_FIELD) or {}
        moments.update({k: v for k, v in existing.items() if k in tl.CLUSTER_MOMENTS})
        moments.update(tl.cluster_moments(runner, None))
        if job.queue_time is not None:
            moments[tl.QUEUED] = tl.format_moment(tl.github_to_local(job.queue_time, skew))
        if offer is not None:
            moments[tl.RECEIVED] = tl.format_moment(offer.received)
            if offer.desired_written is not None:
                moments[tl.DESIRED_WRITTEN] = tl.format_moment(offer.desired_written)
            if offer.capacity:
                moments[tl.CAPACITY] = offer.capacity
        elif job.scale_set_assign_time is not None:
            moments[tl.RECEIVED] = tl.format_moment(
                tl.github_to_local(job.scale_set_assign_time, skew)
            )
        if job.runner_assign_time is not None:
            moments[tl.RUNNER_ASSIGNED] = tl.format_moment(
                tl.github_to_local(job.runner_assign_time, skew)
            )
        moments[tl.JOB_STARTED] = tl.format_moment(now)
        return tl.Timeline(moments)

    def forget(self, job: JobMessageBase) -> None:
        """The job started or ended: it waits for nothing any more."""
        self._offers.pop(job.runner_request_id, None)
