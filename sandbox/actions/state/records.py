"""The Actions service's state: scale sets, sessions, message queues, jobs and runners.

All mutations are synchronous and happen on the event loop, so no locks are needed; every
mutation wakes the waiters (`wait_for`, long polls, simulated runners) through one event.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from sandbox.actions.credentials import CredentialStore

JobState = Literal["queued", "available", "acquired", "assigned", "started", "completed"]

ZERO_TIME = "0001-01-01T00:00:00Z"
# The service batches at most this many job messages into one queue message.
MAX_JOB_MESSAGES_PER_MESSAGE = 50
DEFAULT_RUNNER_GROUP_ID = 1
# The service re-offers a job whose assignment nobody started at most this many times.
MAX_REOFFERS = 3

EX_SCALE_SET_NOT_FOUND = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException"
EX_SCALE_SET_EXISTS = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetExistsException"
EX_RUNNER_GROUP_NOT_FOUND = "GitHub.Actions.Runtime.WebApi.RunnerGroupNotFoundException"
EX_SESSION_CONFLICT = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException"
EX_SESSION_EXPIRED = "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException"
EX_SESSION_NOT_FOUND = "GitHub.Actions.Runtime.WebApi.RunnerAdminException"
EX_AGENT_EXISTS = "GitHub.DistributedTask.WebApi.AgentExistsException"
EX_AGENT_NOT_FOUND = "GitHub.DistributedTask.WebApi.AgentNotFoundException"
EX_JOB_STILL_RUNNING = "GitHub.DistributedTask.WebApi.JobStillRunningException"
EX_ARGUMENT = "System.ArgumentException"


class ServiceError(Exception):
    """An Actions-service error answered as `{"typeName", "message"}` with this status."""

    def __init__(self, status: int, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.status = status
        self.type_name = type_name
        self.message = message


def rfc3339(timestamp: float | None) -> str:
    if timestamp is None:
        return ZERO_TIME
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


@dataclass
class RunnerGroup:
    id: int
    name: str

    def to_wire(self, size: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "size": size,
            "isDefaultGroup": self.id == DEFAULT_RUNNER_GROUP_ID,
        }


@dataclass
class ScaleSet:
    id: int
    name: str
    runner_group_id: int
    labels: list[dict[str, str]]
    runner_setting: dict[str, Any]
    created_on: float

    def label_names(self) -> set[str]:
        return {label["name"].lower() for label in self.labels}


@dataclass
class Session:
    id: str
    scale_set_id: int
    owner_name: str
    message_queue_token: str
    last_seen: float
    polls_in_flight: int = 0
    max_capacity: int | None = None


@dataclass
class Job:
    id: int
    labels: list[str]
    duration: float
    result: str
    repository: str
    workflow_ref: str
    display_name: str
    event_name: str
    job_id: str
    workflow_run_id: int
    queue_time: float
    state: JobState = "queued"
    scale_set_id: int | None = None
    runner_id: int | None = None
    runner_name: str = ""
    scale_set_assign_time: float | None = None
    runner_assign_time: float | None = None
    finish_time: float | None = None
    final_result: str = ""
    # True while a JobAvailable for this job sits in a queue unacknowledged; a new session is
    # offered the available jobs whose offer was already consumed.
    offer_outstanding: bool = False
    reoffers: int = 0

    @property
    def owner_name(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def repository_name(self) -> str:
        return self.repository.split("/", 1)[-1]


@dataclass
class Runner:
    id: int
    name: str
    scale_set_id: int
    work_folder: str
    token: str = field(repr=False)
    online: bool = False
    job_id: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "runnerScaleSetId": self.scale_set_id}


@dataclass
class Message:
    id: int
    events: list[dict[str, Any]]
    statistics: dict[str, int]

    def to_wire(self) -> dict[str, Any]:
        return {
            "messageId": self.id,
            "messageType": "RunnerScaleSetJobMessages",
            "body": json.dumps(self.events, separators=(",", ":")),
            "statistics": self.statistics,
        }


@dataclass
class MessageQueue:
    """One queue per scale set: it outlives sessions so a new listener gets unacked messages."""

    pending: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[int, Message] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    status: int
    endpoint: str
    headers: dict[str, str]
    # The request body as sent; no request of the protocol carries a secret in its body.
    body: str = ""


class ServiceState:
    """Everything the emulated service knows; handlers and simulated runners call its methods."""

    def __init__(
        self,
        *,
        credentials: CredentialStore,
        session_timeout: float,
        require_acquire: bool,
    ) -> None:
        self.credentials = credentials
        self.session_timeout = session_timeout
        self.require_acquire = require_acquire
        self.service_url = ""
        self.message_queue_url = ""
        self.runner_groups: dict[int, RunnerGroup] = {
            DEFAULT_RUNNER_GROUP_ID: RunnerGroup(DEFAULT_RUNNER_GROUP_ID, "Default")
        }
        self.scale_sets: dict[int, ScaleSet] = {}
        self.sessions: dict[str, Session] = {}
        self.queues: dict[int, MessageQueue] = {}
        self.jobs: dict[int, Job] = {}
        self.runners: dict[int, Runner] = {}
        self.requests: list[RequestRecord] = []
        self.runner_version_deprecated = False
        self._changed = asyncio.Event()
        self._next_scale_set_id = 1
        self._next_runner_group_id = 2
        self._next_message_id = 1
        self._next_job_id = 1001
        self._next_runner_id = 1
        self._next_workflow_run_id = 9001

    # -- change notification -------------------------------------------------------------

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], bool], *, within: float | None) -> None:
        """Return once `predicate()` holds; TimeoutError after `within` seconds (None: never)."""
        async with asyncio.timeout(within):
            while not predicate():
                await self._changed.wait()

    async def wait_changed(self, *, within: float) -> None:
        """Wait for the next mutation, or `within` seconds, whichever comes first."""
        try:
            async with asyncio.timeout(within):
                await self._changed.wait()
        except TimeoutError:
            return

    # -- inspection ----------------------------------------------------------------------

    def count(
        self,
        endpoint: str | None = None,
        *,
        method: str | None = None,
        status: int | None = None,
    ) -> int:
        """How many requests matched; the fields left None match anything."""
        return sum(
            1
            for r in self.requests
            if (endpoint is None or r.endpoint == endpoint)
            and (method is None or r.method == method)
            and (status is None or r.status == status)
        )

    def statistics(self, scale_set_id: int) -> dict[str, int]:
        jobs = [j for j in self.jobs.values() if j.scale_set_id == scale_set_id]
        runners = [r for r in self.runners.values() if r.scale_set_id == scale_set_id]
        busy = sum(1 for r in runners if r.job_id is not None)
        return {
            "totalAvailableJobs": sum(1 for j in jobs if j.state == "available"),
            "totalAcquiredJobs": sum(1 for j in jobs if j.state == "acquired"),
            "totalAssignedJobs": sum(1 for j in jobs if j.state in ("assigned", "started")),
            "totalRunningJobs": sum(1 for j in jobs if j.state == "started"),
            "totalRegisteredRunners": len(runners),
            "totalBusyRunners": busy,
            "totalIdleRunners": len(runners) - busy,
        }

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able picture of the state (no secrets) for the admin API."""
        return {
            "runnerGroups": [
                g.to_wire(self._group_size(g.id)) for g in self.runner_groups.values()
            ],
            "scaleSets": [self.scale_set_wire(s) for s in self.scale_sets.values()],
            "sessions": [
                {
                    "sessionId": s.id,
                    "runnerScaleSetId": s.scale_set_id,
                    "ownerName": s.owner_name,
                    "maxCapacity": s.max_capacity,
                }
                for s in self.sessions.values()
            ],
            "jobs": [
                {
                    "runnerRequestId": j.id,
                    "state": j.state,
                    "runnerScaleSetId": j.scale_set_id,
                    "runnerId": j.runner_id,
                    "runnerName": j.runner_name,
                    "labels": j.labels,
                    "result": j.final_result,
                }
                for j in self.jobs.values()
            ],
            "runners": [
                {**r.to_wire(), "online": r.online, "jobRequestId": r.job_id}
                for r in self.runners.values()
            ],
            "queues": {
                str(sid): {
                    "pendingJobMessages": len(q.pending),
                    "unackedMessages": sorted(q.messages),
                }
                for sid, q in self.queues.items()
            },
            "requestCount": len(self.requests),
            "runnerVersionDeprecated": self.runner_version_deprecated,
        }

    # -- runner groups and scale sets ----------------------------------------------------

    def add_runner_group(self, name: str) -> int:
        group = RunnerGroup(self._next_runner_group_id, name)
        self._next_runner_group_id += 1
        self.runner_groups[group.id] = group
        self.notify()
        return group.id

    def runner_groups_named(self, name: str) -> list[RunnerGroup]:
        return [g for g in self.runner_groups.values() if g.name.lower() == name.lower()]

    def _group_size(self, group_id: int) -> int:
        return sum(1 for s in self.scale_sets.values() if s.runner_group_id == group_id)

    def scale_set_wire(self, scale_set: ScaleSet) -> dict[str, Any]:
        return {
            "id": scale_set.id,
            "name": scale_set.name,
            "runnerGroupId": scale_set.runner_group_id,
            "runnerGroupName": self.runner_groups[scale_set.runner_group_id].name,
            "labels": scale_set.labels,
            "RunnerSetting": scale_set.runner_setting,
            "createdOn": rfc3339(scale_set.created_on),
            "runnerJitConfigUrl": (
                f"{self.service_url}_apis/runtime/runnerscalesets/{scale_set.id}/generatejitconfig"
            ),
            "statistics": self.statistics(scale_set.id),
        }

    def scale_set(self, scale_set_id: int) -> ScaleSet:
        scale_set = self.scale_sets.get(scale_set_id)
        if scale_set is None:
            raise ServiceError(
                404, EX_SCALE_SET_NOT_FOUND, f"The runner scale set {scale_set_id} does not exist."
            )
        return scale_set

    def find_scale_sets(self, *, name: str, runner_group_id: int | None) -> list[ScaleSet]:
        return [
            s
            for s in self.scale_sets.values()
            if s.name.lower() == name.lower()
            and (runner_group_id is None or s.runner_group_id == runner_group_id)
        ]

    def _check_group(self, group_id: int) -> None:
        if group_id not in self.runner_groups:
            raise ServiceError(
                404, EX_RUNNER_GROUP_NOT_FOUND, f"The runner group {group_id} does not exist."
            )

    def _check_name_free(self, name: str, *, except_id: int = 0) -> None:
        if not name:
            raise ServiceError(400, EX_ARGUMENT, "The runner scale set name is required.")
        for other in self.scale_sets.values():
            if other.id != except_id and other.name.lower() == name.lower():
                raise ServiceError(
                    409, EX_SCALE_SET_EXISTS, f"A runner scale set named {name} already exists."
                )

    def create_scale_set(
        self,
        *,
        name: str,
        runner_group_id: int,
        labels: list[dict[str, str]],
        runner_setting: dict[str, Any],
    ) -> ScaleSet:
        self._check_name_free(name)
        self._check_group(runner_group_id)
        scale_set = ScaleSet(
            id=self._next_scale_set_id,
            name=name,
            runner_group_id=runner_group_id,
            labels=labels or [{"type": "System", "name": name}],
            runner_setting=runner_setting,
            created_on=time.time(),
        )
        self._next_scale_set_id += 1
        self.scale_sets[scale_set.id] = scale_set
        self.queues[scale_set.id] = MessageQueue()
        self._route_queued_jobs()
        self.notify()
        return scale_set

    def update_scale_set(
        self,
        scale_set_id: int,
        *,
        name: str,
        runner_group_id: int,
        labels: list[dict[str, str]],
        runner_setting: dict[str, Any] | None,
    ) -> ScaleSet:
        """Zero and empty fields mean "unchanged", as the Go client omits them."""
        scale_set = self.scale_set(scale_set_id)
        if name:
            self._check_name_free(name, except_id=scale_set_id)
        if runner_group_id:
            self._check_group(runner_group_id)
            scale_set.runner_group_id = runner_group_id
        if name:
            scale_set.name = name
        if labels:
            scale_set.labels = labels
        if runner_setting:
            scale_set.runner_setting = runner_setting
        self._route_queued_jobs()
        self.notify()
        return scale_set

    def delete_scale_set(self, scale_set_id: int) -> None:
        self.scale_set(scale_set_id)
        for session in [s for s in self.sessions.values() if s.scale_set_id == scale_set_id]:
            self._drop_session(session)
        for runner in [r for r in self.runners.values() if r.scale_set_id == scale_set_id]:
            job = self.jobs.get(runner.job_id) if runner.job_id is not None else None
            if job is not None and job.state == "started":
                self._complete(job, result="canceled")
            self.runners.pop(runner.id, None)
        del self.scale_sets[scale_set_id]
        del self.queues[scale_set_id]
        for job in self.jobs.values():
            if job.scale_set_id == scale_set_id and job.state != "completed":
                job.state, job.scale_set_id, job.scale_set_assign_time = "queued", None, None
                job.runner_id, job.runner_name = None, ""
                job.offer_outstanding = False
        self._route_queued_jobs()
        self.notify()

    # -- sessions ------------------------------------------------------------------------

    def _expired(self, session: Session) -> bool:
        return (
            session.polls_in_flight == 0
            and time.monotonic() - session.last_seen > self.session_timeout
        )

    def active_session(self, scale_set_id: int) -> Session | None:
        for session in list(self.sessions.values()):
            if session.scale_set_id != scale_set_id:
                continue
            if self._expired(session):
                self._drop_session(session)
                continue
            return session
        return None

    def live_session(self, session_id: str) -> Session | None:
        """The session if it exists and has not expired (an expired one is dropped)."""
        session = self.sessions.get(session_id)
        if session is not None and self._expired(session):
            self._drop_session(session)
            return None
        return session

    def _drop_session(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self.credentials.revoke_session_tokens(session.id)

    def _issue_message_queue_token(self, session_id: str) -> str:
        return self.credentials.issue(
            "message_queue",
            ttl=self.credentials.message_queue_token_ttl,
            session_id=session_id,
        )

    def create_session(self, scale_set_id: int, *, owner_name: str) -> Session:
        scale_set = self.scale_set(scale_set_id)
        if self.active_session(scale_set_id) is not None:
            raise ServiceError(
                409,
                EX_SESSION_CONFLICT,
                f"The actions runner scaleset {scale_set.name} already has an active session.",
            )
        session_id = str(uuid.uuid4())
        session = Session(
            id=session_id,
            scale_set_id=scale_set_id,
            owner_name=owner_name,
            message_queue_token=self._issue_message_queue_token(session_id),
            last_seen=time.monotonic(),
        )
        self.sessions[session.id] = session
        for job in self.jobs.values():
            available = job.scale_set_id == scale_set_id and job.state == "available"
            if available and not job.offer_outstanding:
                self._emit(job, "JobAvailable")
        self.notify()
        return session

    def session(self, scale_set_id: int, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.scale_set_id != scale_set_id:
            raise ServiceError(
                404,
                EX_SESSION_NOT_FOUND,
                f"Runner scale set {scale_set_id} has no session ID {session_id}; "
                "a session ID that doesn't exist cannot be used.",
            )
        if self._expired(session):
            self._drop_session(session)
            raise ServiceError(
                400,
                EX_SESSION_EXPIRED,
                f"The session identifier {session_id} is not valid; it has expired.",
            )
        return session

    def refresh_session(self, scale_set_id: int, session_id: str) -> Session:
        session = self.session(scale_set_id, session_id)
        self.credentials.revoke_session_tokens(session.id)
        session.message_queue_token = self._issue_message_queue_token(session.id)
        session.last_seen = time.monotonic()
        self.notify()
        return session

    def delete_session(self, scale_set_id: int, session_id: str) -> None:
        self._drop_session(self.session(scale_set_id, session_id))
        self.notify()

    def evict_sessions(self, scale_set_id: int | None = None) -> int:
        """Forget sessions as the service does when it expires them; returns how many."""
        evicted = [s for s in self.sessions.values() if scale_set_id in (None, s.scale_set_id)]
        for session in evicted:
            self._drop_session(session)
        self.notify()
        return len(evicted)

    def session_wire(self, session: Session) -> dict[str, Any]:
        scale_set = self.scale_set(session.scale_set_id)
        return {
            "sessionId": session.id,
            "ownerName": session.owner_name,
            "runnerScaleSet": self.scale_set_wire(scale_set),
            "messageQueueUrl": f"{self.message_queue_url}?sessionId={session.id}",
            "messageQueueAccessToken": session.message_queue_token,
            "statistics": self.statistics(session.scale_set_id),
        }

    # -- messages ------------------------------------------------------------------------

    def next_message(self, scale_set_id: int, *, last_message_id: int) -> Message | None:
        """The first unacked message after `last_message_id`, building one from pending
        job messages when none is waiting. Messages up to `last_message_id` count as acked."""
        queue = self.queues[scale_set_id]
        for message_id in [m for m in queue.messages if m <= last_message_id]:
            self.ack_message(scale_set_id, message_id)
        waiting = sorted(m for m in queue.messages if m > last_message_id)
        if waiting:
            return queue.messages[waiting[0]]
        if not queue.pending:
            return None
        events = queue.pending[:MAX_JOB_MESSAGES_PER_MESSAGE]
        del queue.pending[:MAX_JOB_MESSAGES_PER_MESSAGE]
        message = Message(self._next_message_id, events, self.statistics(scale_set_id))
        self._next_message_id += 1
        queue.messages[message.id] = message
        return message

    def ack_message(self, scale_set_id: int, message_id: int) -> None:
        message = self.queues[scale_set_id].messages.pop(message_id, None)
        if message is None:
            return
        for event in message.events:
            job = self.jobs.get(event["runnerRequestId"])
            if job is not None and event["messageType"] == "JobAvailable":
                job.offer_outstanding = False
        self.notify()

    def _emit(self, job: Job, message_type: str) -> None:
        if job.scale_set_id is None:
            return
        event: dict[str, Any] = {
            "messageType": message_type,
            "runnerRequestId": job.id,
            "repositoryName": job.repository_name,
            "ownerName": job.owner_name,
            "jobId": job.job_id,
            "jobWorkflowRef": job.workflow_ref,
            "jobDisplayName": job.display_name,
            "workflowRunId": job.workflow_run_id,
            "eventName": job.event_name,
            "requestLabels": job.labels,
            "queueTime": rfc3339(job.queue_time),
            "scaleSetAssignTime": rfc3339(job.scale_set_assign_time),
            "runnerAssignTime": rfc3339(job.runner_assign_time),
            "finishTime": rfc3339(job.finish_time),
        }
        if message_type == "JobAvailable":
            event["acquireJobUrl"] = (
                f"{self.service_url}_apis/runtime/runnerscalesets/{job.scale_set_id}/acquirejobs"
            )
            job.offer_outstanding = True
        if message_type in ("JobStarted", "JobCompleted"):
            event["runnerId"] = job.runner_id or 0
            event["runnerName"] = job.runner_name
        if message_type == "JobCompleted":
            event["result"] = job.final_result
        self.queues[job.scale_set_id].pending.append(event)

    # -- jobs ----------------------------------------------------------------------------

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
            id=self._next_job_id,
            labels=list(labels),
            duration=duration,
            result=result,
            repository=repository,
            workflow_ref=workflow_ref,
            display_name=display_name,
            event_name=event_name,
            job_id=str(uuid.uuid4()),
            workflow_run_id=self._next_workflow_run_id,
            queue_time=time.time(),
        )
        self._next_job_id += 1
        self._next_workflow_run_id += 1
        self.jobs[job.id] = job
        self._route_queued_jobs()
        self.notify()
        return job.id

    def _matching_scale_set(self, job: Job) -> ScaleSet | None:
        wanted = {label.lower() for label in job.labels} - {"self-hosted"}
        if not wanted:
            return None
        for scale_set in sorted(self.scale_sets.values(), key=lambda s: s.id):
            if wanted <= scale_set.label_names():
                return scale_set
        return None

    def _route_queued_jobs(self) -> None:
        for job in sorted(self.jobs.values(), key=lambda j: j.id):
            if job.state != "queued":
                continue
            scale_set = self._matching_scale_set(job)
            if scale_set is None:
                continue
            job.scale_set_id = scale_set.id
            if self.require_acquire:
                job.state = "available"
                self._emit(job, "JobAvailable")
            else:
                self._assign_to_scale_set(job)

    def _assign_to_scale_set(self, job: Job) -> None:
        job.state = "assigned"
        job.scale_set_assign_time = time.time()
        self._emit(job, "JobAssigned")
        self._dispatch()

    def acquire_jobs(self, scale_set_id: int, request_ids: list[int]) -> list[int]:
        """Idempotent: an id this scale set already holds is reported acquired again."""
        acquired: list[int] = []
        for request_id in request_ids:
            job = self.jobs.get(request_id)
            if job is None or job.scale_set_id != scale_set_id:
                continue
            if job.state == "available":
                job.state = "acquired"
                self._assign_to_scale_set(job)
                acquired.append(job.id)
            elif job.state in ("acquired", "assigned", "started"):
                acquired.append(job.id)
        self.notify()
        return acquired

    def acquirable_jobs(self, scale_set_id: int) -> list[dict[str, Any]]:
        return [
            {
                "acquireJobUrl": (
                    f"{self.service_url}_apis/runtime/runnerscalesets/{scale_set_id}/acquirejobs"
                ),
                "messageType": "JobAvailable",
                "runnerRequestId": j.id,
                "repositoryName": j.repository_name,
                "ownerName": j.owner_name,
                "jobWorkflowRef": j.workflow_ref,
                "eventName": j.event_name,
                "requestLabels": j.labels,
            }
            for j in self.jobs.values()
            if j.scale_set_id == scale_set_id and j.state == "available"
        ]

    def cancel_job(self, request_id: int) -> None:
        """Cancel as a user would; a running job's runner sees its job completed."""
        job = self.jobs[request_id]
        if job.state != "completed":
            self._complete(job, result="canceled")
            self.notify()

    def reoffer_job(self, request_id: int) -> None:
        """Give up on an assignment nobody started, as the service does: JobCompleted with
        `canceled` for it, then offer the job again; after MAX_REOFFERS it stays canceled."""
        job = self.jobs[request_id]
        if job.state not in ("acquired", "assigned"):
            raise ValueError(f"job {request_id} is {job.state}, not assigned")
        job.final_result, job.finish_time = "canceled", time.time()
        self._emit(job, "JobCompleted")
        runner = self.runners.get(job.runner_id) if job.runner_id is not None else None
        if runner is not None:
            runner.job_id = None
        job.runner_id, job.runner_name = None, ""
        job.reoffers += 1
        if job.reoffers > MAX_REOFFERS:
            job.state = "completed"
        else:
            job.final_result, job.finish_time = "", None
            job.state, job.scale_set_id, job.scale_set_assign_time = "queued", None, None
            self._route_queued_jobs()
        self._dispatch()
        self.notify()

    def _complete(self, job: Job, *, result: str) -> None:
        job.state = "completed"
        job.final_result = result
        job.finish_time = time.time()
        self._emit(job, "JobCompleted")
        runner = self.runners.get(job.runner_id) if job.runner_id is not None else None
        if runner is not None:
            # JIT runners are ephemeral: the service deregisters them after their one job.
            del self.runners[runner.id]

    def _dispatch(self) -> None:
        """Bind assigned jobs to idle online runners of their scale set, oldest first."""
        for scale_set_id in self.scale_sets:
            idle = sorted(
                (
                    r
                    for r in self.runners.values()
                    if r.scale_set_id == scale_set_id and r.online and r.job_id is None
                ),
                key=lambda r: r.id,
            )
            waiting = sorted(
                (
                    j
                    for j in self.jobs.values()
                    if j.scale_set_id == scale_set_id
                    and j.state == "assigned"
                    and j.runner_id is None
                ),
                key=lambda j: j.id,
            )
            for runner, job in zip(idle, waiting, strict=False):
                runner.job_id = job.id
                job.runner_id = runner.id
                job.runner_name = runner.name

    # -- runners -------------------------------------------------------------------------

    def generate_jit_config(
        self, scale_set_id: int, *, name: str, work_folder: str
    ) -> tuple[Runner, dict[str, Any]]:
        scale_set = self.scale_set(scale_set_id)
        if not name:
            raise ServiceError(400, EX_ARGUMENT, "The runner name is required.")
        if any(r.name.lower() == name.lower() for r in self.runners.values()):
            raise ServiceError(409, EX_AGENT_EXISTS, f"A runner named {name} already exists.")
        runner = Runner(
            id=self._next_runner_id,
            name=name,
            scale_set_id=scale_set_id,
            work_folder=work_folder or "_work",
            token=secrets.token_urlsafe(30),
        )
        self._next_runner_id += 1
        self.runners[runner.id] = runner
        settings = {
            "AgentId": runner.id,
            "AgentName": runner.name,
            "PoolId": 0,
            "PoolName": scale_set.name,
            "RunnerScaleSetId": scale_set.id,
            "ServerUrl": self.service_url,
            "WorkFolder": runner.work_folder,
            "Ephemeral": True,
            "DisableUpdate": bool(scale_set.runner_setting.get("disableUpdate", False)),
        }
        credentials = {"Scheme": "OAuthAccessToken", "Data": {"token": runner.token}}
        self.notify()
        return runner, {".runner": settings, ".credentials": credentials}

    def runner(self, runner_id: int) -> Runner:
        runner = self.runners.get(runner_id)
        if runner is None:
            raise ServiceError(404, EX_AGENT_NOT_FOUND, f"No runner with ID {runner_id} exists.")
        return runner

    def runners_named(self, name: str) -> list[Runner]:
        return [r for r in self.runners.values() if r.name.lower() == name.lower()]

    def remove_runner(self, runner_id: int) -> None:
        runner = self.runner(runner_id)
        if runner.job_id is not None:
            raise ServiceError(
                400,
                EX_JOB_STILL_RUNNING,
                f"The runner {runner.name} cannot be removed while job {runner.job_id} runs.",
            )
        del self.runners[runner_id]
        self.notify()

    def runner_online(self, runner_id: int, token: str) -> Runner | None:
        """A simulated runner connects with its JIT credentials; None when it is unknown."""
        runner = self.runners.get(runner_id)
        if runner is None or not secrets.compare_digest(runner.token, token):
            return None
        runner.online = True
        self._dispatch()
        self.notify()
        return runner

    def runner_offline(self, runner_id: int) -> None:
        """The runner process went away: a started job is canceled, a bound one re-dispatched."""
        runner = self.runners.get(runner_id)
        if runner is None:
            return
        runner.online = False
        job = self.jobs.get(runner.job_id) if runner.job_id is not None else None
        if job is not None and job.state == "started":
            self._complete(job, result="canceled")
        elif job is not None:
            job.runner_id, job.runner_name = None, ""
            runner.job_id = None
            self._dispatch()
        self.notify()

    def start_job(self, request_id: int) -> Job:
        job = self.jobs[request_id]
        job.state = "started"
        job.runner_assign_time = time.time()
        self._emit(job, "JobStarted")
        self.notify()
        return job

    def finish_job(self, request_id: int) -> None:
        job = self.jobs[request_id]
        if job.state == "started":
            self._complete(job, result=job.result)
            self.notify()
