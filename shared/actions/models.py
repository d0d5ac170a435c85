"""Wire models of the Actions service, with the exact JSON names.

Unknown fields are ignored and every field has a default, so a newer service cannot break
decoding. Python names are snake_case; `from_wire` reads the JSON form and `to_wire` gives it
(`shared/actions/wiremodel.py`: plain dataclasses, so the listener, which decodes every long-poll
answer with them, does not load pydantic). Tokens and JIT configs are `SecretStr`: their repr and
`to_wire` are masked, `.get_secret_value()` reads them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from shared.actions.transport import MAX_RESPONSE_BYTES
from shared.actions.wiremodel import SecretStr, WireError, WireModel, wire
from shared.wire import DecodeError, decode_json

__all__ = [
    "JOB_MESSAGES",
    "AcquirableJob",
    "JitRunnerConfig",
    "JobAssigned",
    "JobAvailable",
    "JobCompleted",
    "JobMessage",
    "JobMessageBase",
    "JobStarted",
    "Label",
    "RunnerGroup",
    "RunnerReference",
    "RunnerScaleSet",
    "RunnerScaleSetMessage",
    "RunnerScaleSetSession",
    "RunnerSetting",
    "SecretStr",
    "Statistics",
    "WireError",
    "WireModel",
    "decode_job_messages",
]

log = logging.getLogger("shared.actions")

JOB_MESSAGES = "RunnerScaleSetJobMessages"
"""The only envelope `messageType` the service sends; its `body` holds the job messages."""

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(kw_only=True)
class Label(WireModel):
    name: str = ""
    type: str = "System"


@dataclass(kw_only=True)
class RunnerSetting(WireModel):
    disable_update: bool = field(default=False, metadata=wire("disableUpdate"))


@dataclass(kw_only=True)
class Statistics(WireModel):
    """Job and runner counts of a scale set; `total_assigned_jobs` is the scaling input."""

    total_available_jobs: int = field(default=0, metadata=wire("totalAvailableJobs"))
    total_acquired_jobs: int = field(default=0, metadata=wire("totalAcquiredJobs"))
    total_assigned_jobs: int = field(default=0, metadata=wire("totalAssignedJobs"))
    total_running_jobs: int = field(default=0, metadata=wire("totalRunningJobs"))
    total_registered_runners: int = field(default=0, metadata=wire("totalRegisteredRunners"))
    total_busy_runners: int = field(default=0, metadata=wire("totalBusyRunners"))
    total_idle_runners: int = field(default=0, metadata=wire("totalIdleRunners"))


@dataclass(kw_only=True)
class RunnerScaleSet(WireModel):
    id: int = 0
    name: str = ""
    runner_group_id: int = field(default=0, metadata=wire("runnerGroupId"))
    runner_group_name: str = field(default="", metadata=wire("runnerGroupName"))
    labels: list[Label] = field(default_factory=list)
    # Capitalised on the wire, unlike every other field.
    runner_setting: RunnerSetting = field(
        default_factory=RunnerSetting, metadata=wire("RunnerSetting")
    )
    created_on: datetime | None = field(
        default=None, metadata=wire("createdOn", zero_time_is_none=True)
    )
    runner_jit_config_url: str = field(default="", metadata=wire("runnerJitConfigUrl"))
    statistics: Statistics | None = None

    def request_body(self) -> dict[str, Any]:
        """The create/update body the Go client sends: zero fields omitted, except
        `RunnerSetting` and `createdOn`, which it always carries."""
        body: dict[str, Any] = {}
        if self.id:
            body["id"] = self.id
        if self.name:
            body["name"] = self.name
        if self.runner_group_id:
            body["runnerGroupId"] = self.runner_group_id
        if self.runner_group_name:
            body["runnerGroupName"] = self.runner_group_name
        if self.labels:
            body["labels"] = [{"type": lb.type or "System", "name": lb.name} for lb in self.labels]
        body["RunnerSetting"] = self.runner_setting.to_wire()
        body["createdOn"] = (self.created_on or ZERO_TIME).isoformat().replace("+00:00", "Z")
        if self.runner_jit_config_url:
            body["runnerJitConfigUrl"] = self.runner_jit_config_url
        return body


@dataclass(kw_only=True)
class RunnerGroup(WireModel):
    id: int = 0
    name: str = ""
    size: int = 0
    is_default_group: bool = field(default=False, metadata=wire("isDefaultGroup"))


@dataclass(kw_only=True)
class RunnerReference(WireModel):
    id: int = 0
    name: str = ""
    runner_scale_set_id: int = field(default=0, metadata=wire("runnerScaleSetId"))


@dataclass(kw_only=True)
class JitRunnerConfig(WireModel):
    runner: RunnerReference = field(default_factory=RunnerReference)
    encoded_jit_config: SecretStr = field(default=SecretStr(""), metadata=wire("encodedJITConfig"))


@dataclass(kw_only=True)
class RunnerScaleSetSession(WireModel):
    session_id: str = field(default="", metadata=wire("sessionId"))
    owner_name: str = field(default="", metadata=wire("ownerName"))
    runner_scale_set: RunnerScaleSet | None = field(default=None, metadata=wire("runnerScaleSet"))
    message_queue_url: str = field(default="", metadata=wire("messageQueueUrl"))
    message_queue_access_token: SecretStr = field(
        default=SecretStr(""), metadata=wire("messageQueueAccessToken")
    )
    statistics: Statistics | None = None
    """None when the service sent none (the Go listener refuses such a session)."""


@dataclass(kw_only=True)
class AcquirableJob(WireModel):
    acquire_job_url: str = field(default="", metadata=wire("acquireJobUrl"))
    message_type: str = field(default="", metadata=wire("messageType"))
    runner_request_id: int = field(default=0, metadata=wire("runnerRequestId"))
    repository_name: str = field(default="", metadata=wire("repositoryName"))
    owner_name: str = field(default="", metadata=wire("ownerName"))
    job_workflow_ref: str = field(default="", metadata=wire("jobWorkflowRef"))
    event_name: str = field(default="", metadata=wire("eventName"))
    request_labels: list[str] = field(default_factory=list, metadata=wire("requestLabels"))


@dataclass(kw_only=True)
class JobMessageBase(WireModel):
    """Fields common to every job message; the times are None when the service left them zero."""

    numbers_to_str: ClassVar[bool] = True

    runner_request_id: int = field(default=0, metadata=wire("runnerRequestId"))
    repository_name: str = field(default="", metadata=wire("repositoryName"))
    owner_name: str = field(default="", metadata=wire("ownerName"))
    job_id: str = field(default="", metadata=wire("jobId"))
    job_workflow_ref: str = field(default="", metadata=wire("jobWorkflowRef"))
    job_display_name: str = field(default="", metadata=wire("jobDisplayName"))
    workflow_run_id: int = field(default=0, metadata=wire("workflowRunId"))
    event_name: str = field(default="", metadata=wire("eventName"))
    request_labels: list[str] = field(default_factory=list, metadata=wire("requestLabels"))
    queue_time: datetime | None = field(
        default=None, metadata=wire("queueTime", zero_time_is_none=True)
    )
    scale_set_assign_time: datetime | None = field(
        default=None, metadata=wire("scaleSetAssignTime", zero_time_is_none=True)
    )
    runner_assign_time: datetime | None = field(
        default=None, metadata=wire("runnerAssignTime", zero_time_is_none=True)
    )
    finish_time: datetime | None = field(
        default=None, metadata=wire("finishTime", zero_time_is_none=True)
    )


@dataclass(kw_only=True)
class JobAvailable(JobMessageBase):
    message_type: Literal["JobAvailable"] = field(
        default="JobAvailable", metadata=wire("messageType")
    )
    acquire_job_url: str = field(default="", metadata=wire("acquireJobUrl"))


@dataclass(kw_only=True)
class JobAssigned(JobMessageBase):
    message_type: Literal["JobAssigned"] = field(
        default="JobAssigned", metadata=wire("messageType")
    )


@dataclass(kw_only=True)
class JobStarted(JobMessageBase):
    message_type: Literal["JobStarted"] = field(default="JobStarted", metadata=wire("messageType"))
    runner_id: int = field(default=0, metadata=wire("runnerId"))
    runner_name: str = field(default="", metadata=wire("runnerName"))


@dataclass(kw_only=True)
class JobCompleted(JobMessageBase):
    message_type: Literal["JobCompleted"] = field(
        default="JobCompleted", metadata=wire("messageType")
    )
    result: str = ""
    runner_id: int = field(default=0, metadata=wire("runnerId"))
    runner_name: str = field(default="", metadata=wire("runnerName"))


JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted

_JOB_TYPES: dict[str, type[JobMessage]] = {
    "JobAvailable": JobAvailable,
    "JobAssigned": JobAssigned,
    "JobStarted": JobStarted,
    "JobCompleted": JobCompleted,
}


def decode_job_messages(body: str, *, message_id: int = 0) -> list[JobMessage]:
    """The job messages of a double-encoded `body`.

    Elements of an unknown `messageType` or that fail validation are logged and skipped; a body
    that is not a JSON array, or that `shared.wire` refuses (too deep, too long), gives no
    messages (logged).
    """
    if not body.strip():
        return []
    try:
        items = decode_json(body, limit=MAX_RESPONSE_BYTES, what=f"message {message_id}'s body")
    except DecodeError as exc:
        log.warning("%s; no job messages taken from it", exc)
        return []
    if not isinstance(items, list):
        log.warning("message %d: body is not a JSON array; no job messages taken", message_id)
        return []
    jobs: list[JobMessage] = []
    for index, item in enumerate(items):
        kind = item.get("messageType") if isinstance(item, dict) else None
        model = _JOB_TYPES.get(kind) if isinstance(kind, str) else None
        if model is None:
            log.warning(
                "message %d: skipping job message %d of unknown type %r", message_id, index, kind
            )
            continue
        try:
            jobs.append(model.from_wire(item))
        except WireError as exc:
            log.warning(
                "message %d: skipping malformed %s job message %d: %s",
                message_id,
                kind,
                index,
                exc,
            )
    return jobs


@dataclass(kw_only=True)
class RunnerScaleSetMessage(WireModel):
    """One long-poll answer. `jobs` is decoded from `body` when the model is validated."""

    message_id: int = field(metadata=wire("messageId"))
    message_type: str = field(default="", metadata=wire("messageType"))
    body: str = ""
    statistics: Statistics | None = None
    """None when the service sent none; the last known statistics then still hold."""
    jobs: list[JobMessage] = field(default_factory=list, metadata=wire(None))
    """Decoded from `body` when the message is made, unless given."""

    def __post_init__(self) -> None:
        if self.jobs:
            return
        if self.message_type != JOB_MESSAGES:
            log.warning(
                "message %d: skipping envelope of unknown type %r",
                self.message_id,
                self.message_type,
            )
            return
        self.jobs = decode_job_messages(self.body, message_id=self.message_id)
