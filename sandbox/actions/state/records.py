"""The records of the Actions service's state (scale sets, sessions, queues, jobs, runners),
its error answer, and the exception type names the Go client matches on."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

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
    # When a poll first received a message carrying one of this job's events: its JobAvailable,
    # or with direct assignment its JobAssigned (time.time(), as the other job times).
    delivered_time: float | None = None
    final_result: str = ""
    # True while a JobAvailable for this job sits in a queue unacknowledged; a new session is
    # offered the available jobs whose offer was already consumed.
    offer_outstanding: bool = False
    reoffers: int = 0
    tally: Counter[tuple[int | None, str]] | None = field(default=None, repr=False, compare=False)
    """The service's jobs by (scale set, state), kept in step with this job's fields while it
    is in the service's table, so that a scale set's statistics are a few lookups rather than a
    walk over every job (`ServiceData.statistics`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        tally = self.__dict__.get("tally")
        if tally is None or name not in ("state", "scale_set_id"):
            object.__setattr__(self, name, value)
            return
        tally[(self.scale_set_id, self.state)] -= 1
        object.__setattr__(self, name, value)
        tally[(self.scale_set_id, self.state)] += 1

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
    # When the runner process first connected (time.time()); the record goes with the runner,
    # which the service deregisters after its job.
    online_time: float | None = None
    job_id: int | None = None
    busy: Counter[int] | None = field(default=None, repr=False, compare=False)
    """The service's busy runners (with a job) by scale set, kept in step with `job_id` while
    this runner is in the service's table (`RunnerTable`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        busy = self.__dict__.get("busy")
        if busy is not None and name == "job_id":
            busy[self.scale_set_id] += (value is not None) - (self.job_id is not None)
        object.__setattr__(self, name, value)

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
