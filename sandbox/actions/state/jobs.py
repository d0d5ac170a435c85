"""Jobs: queued, routed to the scale set whose labels they match, offered or assigned, acquired,
bound to an idle runner, started and completed."""

from __future__ import annotations

import heapq
import time
import uuid
from typing import Any

from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.queues import Queues
from sandbox.actions.state.records import MAX_REOFFERS, Job, ScaleSet


class Jobs:
    def __init__(self, data: ServiceData, queues: Queues) -> None:
        self.data = data
        self.queues = queues

    def enqueue_job(
        self,
        *,
        labels: list[str],
        duration: float,
        result: str,
        repository: str,
        workflow_ref: str,
        display_name: str,
        event_name: str,
    ) -> int:
        job = Job(
            id=self.data.next_job_id,
            labels=list(labels),
            duration=duration,
            result=result,
            repository=repository,
            workflow_ref=workflow_ref,
            display_name=display_name,
            event_name=event_name,
            job_id=str(uuid.uuid4()),
            workflow_run_id=self.data.next_workflow_run_id,
            queue_time=time.time(),
        )
        self.data.next_job_id += 1
        self.data.next_workflow_run_id += 1
        self.data.add_job(job)
        # The other queued jobs matched no scale set when they were routed, and every change
        # of a scale set routes them again: only the new one can be routed now.
        self._route(job)
        self.data.notify()
        return job.id

    def _matching_scale_set(self, job: Job) -> ScaleSet | None:
        wanted = {label.lower() for label in job.labels} - {"self-hosted"}
        if not wanted:
            return None
        for scale_set in sorted(self.data.scale_sets.values(), key=lambda s: s.id):
            if wanted <= scale_set.label_names():
                return scale_set
        return None

    def route_queued(self) -> None:
        for job in sorted(self.data.jobs.values(), key=lambda j: j.id):
            if job.state == "queued":
                self._route(job)

    def _route(self, job: Job) -> None:
        scale_set = self._matching_scale_set(job)
        if scale_set is not None:
            job.scale_set_id = scale_set.id
            if self.data.require_acquire:
                job.state = "available"
                self.queues.emit(job, "JobAvailable")
            else:
                self._assign_to_scale_set(job)

    def _assign_to_scale_set(self, job: Job) -> None:
        job.state = "assigned"
        job.scale_set_assign_time = time.time()
        self.queues.emit(job, "JobAssigned")
        self.data.job_waits(job)
        self.dispatch()

    def acquire_jobs(self, scale_set_id: int, request_ids: list[int]) -> list[int]:
        """Idempotent: an id this scale set already holds is reported acquired again."""
        acquired: list[int] = []
        for request_id in request_ids:
            job = self.data.jobs.get(request_id)
            if job is None or job.scale_set_id != scale_set_id:
                continue
            if job.state == "available":
                job.state = "acquired"
                self._assign_to_scale_set(job)
                acquired.append(job.id)
            elif job.state in ("acquired", "assigned", "started"):
                acquired.append(job.id)
        self.data.notify()
        return acquired

    def acquirable_jobs(self, scale_set_id: int) -> list[dict[str, Any]]:
        return [
            {
                "acquireJobUrl": (
                    f"{self.data.service_url}_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs"
                ),
                "messageType": "JobAvailable",
                "runnerRequestId": j.id,
                "repositoryName": j.repository_name,
                "ownerName": j.owner_name,
                "jobWorkflowRef": j.workflow_ref,
                "eventName": j.event_name,
                "requestLabels": j.labels,
            }
            for j in self.data.jobs.values()
            if j.scale_set_id == scale_set_id and j.state == "available"
        ]

    def cancel_job(self, request_id: int) -> None:
        """Cancel as a user would; a running job's runner sees its job completed."""
        job = self.data.jobs[request_id]
        if job.state != "completed":
            self.complete(job, result="canceled")
            self.data.notify()

    def reoffer_job(self, request_id: int) -> None:
        """Give up on an assignment nobody started, as the service does: JobCompleted with
        `canceled` for it, then offer the job again; after MAX_REOFFERS it stays canceled."""
        job = self.data.jobs[request_id]
        if job.state not in ("acquired", "assigned"):
            raise ValueError(f"job {request_id} is {job.state}, not assigned")
        job.final_result, job.finish_time = "canceled", time.time()
        self.queues.emit(job, "JobCompleted")
        runner = self.data.runners.get(job.runner_id) if job.runner_id is not None else None
        if runner is not None:
            runner.job_id = None
            self.data.touch(("runner", runner.id))
            if runner.online:
                self.data.runner_idles(runner)
        job.runner_id, job.runner_name = None, ""
        job.reoffers += 1
        if job.reoffers > MAX_REOFFERS:
            job.state = "completed"
            self.data.touch(("job", job.id))
        else:
            job.final_result, job.finish_time = "", None
            job.state, job.scale_set_id, job.scale_set_assign_time = "queued", None, None
            self.route_queued()
        self.dispatch()
        self.data.notify()

    def complete(self, job: Job, *, result: str) -> None:
        job.state = "completed"
        self.data.touch(("job", job.id))
        job.final_result = result
        job.finish_time = time.time()
        self.queues.emit(job, "JobCompleted")
        runner = self.data.runners.get(job.runner_id) if job.runner_id is not None else None
        if runner is not None:
            # JIT runners are ephemeral: the service deregisters them after their one job.
            del self.data.runners[runner.id]

    def dispatch(self) -> None:
        """Bind assigned jobs to idle online runners of their scale set, oldest first.

        Both sides are kept per scale set as they become ready (`ServiceData.job_waits`,
        `runner_idles`), and an entry is checked when taken: walking every job and runner on
        each call made a scale-up or a burst of N cost N x N steps."""
        for scale_set_id, jobs in self.data.waiting_jobs.items():
            runners = self.data.idle_runners.get(scale_set_id)
            while jobs and runners:
                _, job = jobs[0]
                if not (
                    job.state == "assigned"
                    and job.runner_id is None
                    and job.scale_set_id == scale_set_id
                    and self.data.jobs.get(job.id) is job
                ):
                    heapq.heappop(jobs)
                    continue
                _, runner = heapq.heappop(runners)
                if not (
                    runner.online
                    and runner.job_id is None
                    and self.data.runners.get(runner.id) is runner
                ):
                    continue
                heapq.heappop(jobs)
                runner.job_id = job.id
                job.runner_id = runner.id
                job.runner_name = runner.name
                self.data.touch(("runner", runner.id))

    def start_job(self, request_id: int) -> Job:
        job = self.data.jobs[request_id]
        job.state = "started"
        job.runner_assign_time = time.time()
        self.queues.emit(job, "JobStarted")
        self.data.notify()
        return job

    def finish_job(self, request_id: int) -> None:
        job = self.data.jobs[request_id]
        if job.state == "started":
            self.complete(job, result=job.result)
            self.data.notify()
