"""The run as it happens: invariants checked on every write to a runner or the runner set, and
a sampled timeline of jobs and runners for the progress view, the report and the plot.

The observer subscribes to the Kubernetes emulator's store, so it sees every committed write in
order with the identity the API server authenticated for it (docs/sandbox.md#invariants).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sandbox.actions import ActionsEmulator
from sandbox.demo.cluster import (
    CONTROLLER_USER,
    ER_KEY,
    ERS_KEY,
    LISTENER_USER,
    NAMESPACE,
)
from sandbox.kube import KubeEmulator
from sandbox.kube.store import Event
from shared.api.timeline import JOB_ID, JOB_STARTED, TIMELINE_FIELD, Timeline

TERMINAL = frozenset({"Succeeded", "Failed", "Outdated"})
WAITING = frozenset({"queued", "available", "acquired", "assigned"})


@dataclass
class RunnerTrack:
    """One EphemeralRunner's life: the phases it went through, who wrote Running, when."""

    name: str
    created: float
    phases: list[str] = field(default_factory=list)
    running_by: str = ""
    running_at: float | None = None
    deleting: bool = False

    def step(self, phase: str) -> None:
        if phase and (not self.phases or self.phases[-1] != phase):
            self.phases.append(phase)


@dataclass(frozen=True, slots=True)
class Sample:
    """The system at one moment, `t` in simulated seconds since the workload began."""

    t: float
    waiting: int
    running: int
    done: int
    busy: int
    idle: int
    desired: int
    phases: dict[str, int]


class Observer:
    def __init__(
        self,
        gh: ActionsEmulator,
        kube: KubeEmulator,
        *,
        max_runners: int,
        speedup: float = 1.0,
        listener_user: str = LISTENER_USER,
        controller_user: str = CONTROLLER_USER,
    ) -> None:
        self.gh = gh
        self.kube = kube
        self.max_runners = max_runners
        self.speedup = speedup
        self.listener_user = listener_user
        self.controller_user = controller_user
        self.started = time.monotonic()
        self.runners: dict[str, RunnerTrack] = {}
        self.violations: list[dict[str, Any]] = []
        self.killed_jobs: set[int] = set()
        self.max_concurrent = 0
        self.max_desired = 0
        self.samples: list[Sample] = []
        self.timelines: dict[str, Timeline] = {}
        """Per job id, the timeline the listener wrote on its runner (docs/job-timeline.md)."""
        self._subscription = kube.store.subscribe({ER_KEY, ERS_KEY})

    def elapsed(self) -> float:
        """Simulated seconds since the observer started."""
        return (time.monotonic() - self.started) * self.speedup

    async def run(self) -> None:
        """Check every event until cancelled (or the store closes the subscription)."""
        try:
            while True:
                event = await self._subscription.queue.get()
                if not isinstance(event, Event):
                    return
                if event.obj["metadata"].get("namespace") != NAMESPACE:
                    continue
                if event.key == ER_KEY:
                    self._runner_event(event)
                else:
                    self._runner_set_event(event)
        finally:
            self.kube.store.unsubscribe(self._subscription)

    def _violation(self, invariant: str, subject: str, detail: str) -> None:
        self.violations.append(
            {
                "invariant": invariant,
                "object": subject,
                "detail": detail,
                "at_s": round(self.elapsed(), 2),
            }
        )

    def _runner_event(self, event: Event) -> None:
        obj, old = event.obj, event.old or {}
        meta = obj["metadata"]
        name = f"ephemeralrunner/{meta['name']}"
        track = self.runners.get(meta["uid"])
        if track is None:
            track = self.runners[meta["uid"]] = RunnerTrack(meta["name"], self.elapsed())
            track.step("New")
            self.max_concurrent = max(
                self.max_concurrent, sum(1 for _ in self.kube.store.items(ER_KEY, NAMESPACE))
            )
            live = sum(1 for runner in self.kube.store.items(ER_KEY, NAMESPACE) if _live(runner))
            if live > self.max_runners:
                self._violation(
                    "runners-above-max",
                    name,
                    f"{live} runners neither finished nor deleting > maxRunners "
                    f"{self.max_runners}, created by {event.actor}",
                )
        phase = (obj.get("status") or {}).get("phase") or ""
        before = (old.get("status") or {}).get("phase") or ""
        track.step(phase)
        self._timeline(obj)
        if phase == "Running" and before != "Running":
            if before in TERMINAL:
                self._violation(
                    "terminal-to-running", name, f"{before} -> Running by {event.actor}"
                )
            if event.actor != self.listener_user:
                self._violation(
                    "running-not-by-listener", name, f"Running written by {event.actor or '?'}"
                )
            track.running_by, track.running_at = event.actor, self.elapsed()
        deleting = event.type == "DELETED" or "deletionTimestamp" in meta
        if deleting and not track.deleting:
            track.deleting = True
            job = self._busy_job(obj)
            # Scale-down is the controller deleting runners; an admin deleting one is not (if
            # that ends a running job, check_killed counts it).
            if job is not None and event.actor == self.controller_user:
                self._violation(
                    "busy-runner-deleted",
                    name,
                    f"deleted by {event.actor} while running job {job}",
                )
        if event.type == "DELETED":
            track.step("deleted")

    def _timeline(self, runner: dict[str, Any]) -> None:
        """Keep the job's timeline once the listener has written it; later writes (the
        controller's, which add no moment of the job) do not replace it."""
        moments = (runner.get("status") or {}).get(TIMELINE_FIELD) or {}
        job = moments.get(JOB_ID)
        if job and JOB_STARTED in moments and job not in self.timelines:
            self.timelines[job] = Timeline(dict(moments))

    def _busy_job(self, runner: dict[str, Any]) -> int | None:
        """The job the service says is running on this runner now, if any."""
        runner_id = (runner.get("status") or {}).get("runnerId")
        record = self.gh.state.runners.get(runner_id) if isinstance(runner_id, int) else None
        if record is None or record.job_id is None:
            return None
        job = self.gh.state.jobs.get(record.job_id)
        return job.id if job is not None and job.state == "started" else None

    @property
    def killed_while_busy(self) -> int:
        return len(self.killed_jobs)

    def check_killed(self) -> None:
        """Remember each job that started and then ended canceled: the service cancels a
        running job when its runner goes away (a job canceled by hand counts too; the demo
        cancels none)."""
        for job in self.gh.state.jobs.values():
            if (
                job.state == "completed"
                and job.final_result == "canceled"
                and job.runner_assign_time is not None
            ):
                self.killed_jobs.add(job.id)

    def _runner_set_event(self, event: Event) -> None:
        # The demo's namespace holds one runner set; in-cluster the controller names it.
        if event.type == "DELETED":
            return
        name = event.obj["metadata"]["name"]
        replicas = int((event.obj.get("spec") or {}).get("replicas") or 0)
        self.max_desired = max(self.max_desired, replicas)
        if replicas > self.max_runners:
            self._violation(
                "replicas-above-max",
                f"ephemeralrunnerset/{name}",
                f"replicas {replicas} > maxRunners {self.max_runners} by {event.actor}",
            )

    def sample(self, job_ids: list[int]) -> Sample:
        """Record and return the system's state now."""
        self.check_killed()
        states = Counter(self.gh.state.jobs[i].state for i in job_ids)
        phases: Counter[str] = Counter(
            (obj.get("status") or {}).get("phase") or "New"
            for obj in self.kube.store.items(ER_KEY, NAMESPACE)
        )
        # A runner in a terminal phase has exited and is only waiting to be deleted: neither
        # busy nor idle capacity.
        total = sum(n for phase, n in phases.items() if phase not in TERMINAL)
        busy = states["started"]
        desired = sum(
            int((ers.get("spec") or {}).get("replicas") or 0)
            for ers in self.kube.store.items(ERS_KEY, NAMESPACE)
        )
        sample = Sample(
            t=self.elapsed(),
            waiting=sum(n for state, n in states.items() if state in WAITING),
            running=busy,
            done=states["completed"],
            busy=min(busy, total),
            idle=max(0, total - busy),
            desired=desired,
            phases=dict(sorted(phases.items())),
        )
        self.samples.append(sample)
        return sample


def _live(runner: dict[str, Any]) -> bool:
    """A runner that counts against maxRunners: neither finished nor being deleted."""
    phase = (runner.get("status") or {}).get("phase") or ""
    return phase not in TERMINAL and "deletionTimestamp" not in runner["metadata"]
