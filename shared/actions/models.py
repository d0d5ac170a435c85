"""Wire models of the Actions service, with the exact JSON names as aliases.

Unknown fields are ignored and every field has a default, so a newer service cannot break
decoding. Python names are snake_case; `model_dump(by_alias=True)` gives the wire form. Tokens and
JIT configs are `SecretStr`: their repr and default dump are masked, `.get_secret_value()` reads
them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from shared.actions.transport import MAX_RESPONSE_BYTES
from shared.wire import DecodeError, decode_json

log = logging.getLogger("shared.actions")

JOB_MESSAGES = "RunnerScaleSetJobMessages"
"""The only envelope `messageType` the service sends; its `body` holds the job messages."""

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def _optional_time(value: object) -> object:
    """Go's zero time, `null` and `""` all mean "not set"."""
    if value in (None, "") or (isinstance(value, str) and value.startswith("0001-01-01")):
        return None
    return value


OptionalTime = Annotated[datetime | None, BeforeValidator(_optional_time)]


class WireModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class Label(WireModel):
    name: str = ""
    type: str = "System"


class RunnerSetting(WireModel):
    disable_update: bool = Field(default=False, alias="disableUpdate")


class Statistics(WireModel):
    """Job and runner counts of a scale set; `total_assigned_jobs` is the scaling input."""

    total_available_jobs: int = Field(default=0, alias="totalAvailableJobs")
    total_acquired_jobs: int = Field(default=0, alias="totalAcquiredJobs")
    total_assigned_jobs: int = Field(default=0, alias="totalAssignedJobs")
    total_running_jobs: int = Field(default=0, alias="totalRunningJobs")
    total_registered_runners: int = Field(default=0, alias="totalRegisteredRunners")
    total_busy_runners: int = Field(default=0, alias="totalBusyRunners")
    total_idle_runners: int = Field(default=0, alias="totalIdleRunners")


class RunnerScaleSet(WireModel):
    id: int = 0
    name: str = ""
    runner_group_id: int = Field(default=0, alias="runnerGroupId")
    runner_group_name: str = Field(default="", alias="runnerGroupName")
    labels: list[Label] = Field(default_factory=list)
    # Capitalised on the wire, unlike every other field.
    runner_setting: RunnerSetting = Field(default_factory=RunnerSetting, alias="RunnerSetting")
    created_on: OptionalTime = Field(default=None, alias="createdOn")
    runner_jit_config_url: str = Field(default="", alias="runnerJitConfigUrl")
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
        body["RunnerSetting"] = self.runner_setting.model_dump(by_alias=True)
        body["createdOn"] = (self.created_on or ZERO_TIME).isoformat().replace("+00:00", "Z")
        if self.runner_jit_config_url:
            body["runnerJitConfigUrl"] = self.runner_jit_config_url
        return body


class RunnerGroup(WireModel):
    id: int = 0
    name: str = ""
    size: int = 0
    is_default_group: bool = Field(default=False, alias="isDefaultGroup")


class RunnerReference(WireModel):
    id: int = 0
    name: str = ""
    runner_scale_set_id: int = Field(default=0, alias="runnerScaleSetId")


class JitRunnerConfig(WireModel):
    runner: RunnerReference = Field(default_factory=RunnerReference)
    encoded_jit_config: SecretStr = Field(default=SecretStr(""), alias="encodedJITConfig")


class RunnerScaleSetSession(WireModel):
    session_id: str = Field(default="", alias="sessionId")
    owner_name: str = Field(default="", alias="ownerName")
    runner_scale_set: RunnerScaleSet | None = Field(default=None, alias="runnerScaleSet")
    message_queue_url: str = Field(default="", alias="messageQueueUrl")
    message_queue_access_token: SecretStr = Field(
        default=SecretStr(""), alias="messageQueueAccessToken"
    )
    statistics: Statistics | None = None
    """None when the service sent none (the Go listener refuses such a session)."""


class AcquirableJob(WireModel):
    acquire_job_url: str = Field(default="", alias="acquireJobUrl")
    message_type: str = Field(default="", alias="messageType")
    runner_request_id: int = Field(default=0, alias="runnerRequestId")
    repository_name: str = Field(default="", alias="repositoryName")
    owner_name: str = Field(default="", alias="ownerName")
    job_workflow_ref: str = Field(default="", alias="jobWorkflowRef")
    event_name: str = Field(default="", alias="eventName")
    request_labels: list[str] = Field(default_factory=list, alias="requestLabels")


class JobMessageBase(WireModel):
    """Fields common to every job message; the times are None when the service left them zero."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", coerce_numbers_to_str=True)

    runner_request_id: int = Field(default=0, alias="runnerRequestId")
    repository_name: str = Field(default="", alias="repositoryName")
    owner_name: str = Field(default="", alias="ownerName")
    job_id: str = Field(default="", alias="jobId")
    job_workflow_ref: str = Field(default="", alias="jobWorkflowRef")
    job_display_name: str = Field(default="", alias="jobDisplayName")
    workflow_run_id: int = Field(default=0, alias="workflowRunId")
    event_name: str = Field(default="", alias="eventName")
    request_labels: list[str] = Field(default_factory=list, alias="requestLabels")
    queue_time: OptionalTime = Field(default=None, alias="queueTime")
    scale_set_assign_time: OptionalTime = Field(default=None, alias="scaleSetAssignTime")
    runner_assign_time: OptionalTime = Field(default=None, alias="runnerAssignTime")
    finish_time: OptionalTime = Field(default=None, alias="finishTime")


class JobAvailable(JobMessageBase):
    message_type: Literal["JobAvailable"] = Field(default="JobAvailable", alias="messageType")
    acquire_job_url: str = Field(default="", alias="acquireJobUrl")


class JobAssigned(JobMessageBase):
    message_type: Literal["JobAssigned"] = Field(default="JobAssigned", alias="messageType")


class JobStarted(JobMessageBase):
    message_type: Literal["JobStarted"] = Field(default="JobStarted", alias="messageType")
    runner_id: int = Field(default=0, alias="runnerId")
    runner_name: str = Field(default="", alias="runnerName")


class JobCompleted(JobMessageBase):
    message_type: Literal["JobCompleted"] = Field(default="JobCompleted", alias="messageType")
    result: str = ""
    runner_id: int = Field(default=0, alias="runnerId")
    runner_name: str = Field(default="", alias="runnerName")


JobMessage = JobAvailable | JobAssigned | JobStarted | JobCompleted

_JOB_TYPES: dict[str, TypeAdapter[Any]] = {
    cls.model_fields["message_type"].default: TypeAdapter(cls)
    for cls in (JobAvailable, JobAssigned, JobStarted, JobCompleted)
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
        adapter = _JOB_TYPES.get(kind) if isinstance(kind, str) else None
        if adapter is None:
            log.warning(
                "message %d: skipping job message %d of unknown type %r", message_id, index, kind
            )
            continue
        try:
            jobs.append(adapter.validate_python(item))
        except ValidationError as exc:
            log.warning(
                "message %d: skipping malformed %s job message %d: %s",
                message_id,
                kind,
                index,
                exc.errors(include_input=False, include_url=False),
            )
    return jobs


class RunnerScaleSetMessage(WireModel):
    """One long-poll answer. `jobs` is decoded from `body` when the model is validated."""

    message_id: int = Field(alias="messageId")
    message_type: str = Field(default="", alias="messageType")
    body: str = ""
    statistics: Statistics | None = None
    """None when the service sent none; the last known statistics then still hold."""
    jobs: list[JobMessage] = Field(default_factory=list, exclude=True)

    @model_validator(mode="after")
    def _decode_jobs(self) -> RunnerScaleSetMessage:
        if self.jobs:
            return self
        if self.message_type != JOB_MESSAGES:
            log.warning(
                "message %d: skipping envelope of unknown type %r",
                self.message_id,
                self.message_type,
            )
            return self
        self.jobs = decode_job_messages(self.body, message_id=self.message_id)
        return self
