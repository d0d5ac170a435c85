"""Decoding of the wire models: messages, job messages, sessions, scale set request bodies.

The models are dataclasses read by `from_wire` and written by `to_wire` (pydantic's
`model_validate` and `model_dump(by_alias=True)` before: the listener no longer loads pydantic,
docs/listener.md#memory); what they accept and refuse is unchanged."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.actions import (
    JitRunnerConfig,
    JobAssigned,
    JobAvailable,
    JobCompleted,
    JobStarted,
    Label,
    RunnerScaleSet,
    RunnerScaleSetMessage,
    RunnerScaleSetSession,
    RunnerSetting,
    Statistics,
    decode_job_messages,
)
from shared.actions.models import WireError

STATS = {
    "totalAvailableJobs": 1,
    "totalAcquiredJobs": 2,
    "totalAssignedJobs": 3,
    "totalRunningJobs": 4,
    "totalRegisteredRunners": 5,
    "totalBusyRunners": 6,
    "totalIdleRunners": 7,
}


def _envelope(jobs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "messageId": 100000171,
        "messageType": "RunnerScaleSetJobMessages",
        "body": json.dumps(jobs),
        "statistics": STATS,
        **extra,
    }


def test_statistics_from_wire_names() -> None:
    stats = Statistics.from_wire(STATS)
    assert (stats.total_available_jobs, stats.total_assigned_jobs, stats.total_idle_runners) == (
        1,
        3,
        7,
    )
    assert stats.to_wire() == STATS


def test_message_decodes_each_job_type() -> None:
    jobs = [
        {"messageType": "JobAvailable", "runnerRequestId": 101, "acquireJobUrl": "https://x/a"},
        {"messageType": "JobAssigned", "runnerRequestId": 102},
        {
            "messageType": "JobStarted",
            "runnerRequestId": 103,
            "runnerId": 9,
            "runnerName": "r-1",
            "ownerName": "owner",
            "repositoryName": "repo",
            "jobId": "job-1",
            "workflowRunId": 77,
            "jobWorkflowRef": "owner/repo/.github/workflows/ci.yml@refs/heads/main",
            "jobDisplayName": "build",
            "eventName": "push",
            "requestLabels": ["self-hosted"],
            "runnerAssignTime": "2026-12-02T10:00:05Z",
            "scaleSetAssignTime": "2026-12-02T10:00:00Z",
        },
        {"messageType": "JobCompleted", "runnerRequestId": 104, "result": "failed", "runnerId": 9},
    ]
    message = RunnerScaleSetMessage.from_wire(_envelope(jobs))
    assert [type(j) for j in message.jobs] == [JobAvailable, JobAssigned, JobStarted, JobCompleted]
    started = message.jobs[2]
    assert isinstance(started, JobStarted)
    assert (started.runner_id, started.runner_name, started.job_id) == (9, "r-1", "job-1")
    assert started.runner_assign_time == datetime(2026, 12, 2, 10, 0, 5, tzinfo=UTC)
    assert started.finish_time is None
    assert message.statistics == Statistics.from_wire(STATS)


def test_message_accepts_bom_free_json_bytes_and_unknown_fields() -> None:
    raw = json.dumps(_envelope([{"messageType": "JobAssigned", "futureField": 1}], extra=True))
    message = RunnerScaleSetMessage.from_wire(json.loads(raw))
    assert isinstance(message.jobs[0], JobAssigned)


def test_unknown_job_type_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    jobs: list[dict[str, Any]] = [
        {"messageType": "JobTeleported", "runnerRequestId": 1},
        {"messageType": "JobAssigned"},
    ]
    with caplog.at_level(logging.WARNING, logger="shared.actions"):
        message = RunnerScaleSetMessage.from_wire(_envelope(jobs))
    assert [type(j) for j in message.jobs] == [JobAssigned]
    assert "JobTeleported" in caplog.text


def test_malformed_job_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    jobs = [
        {"messageType": "JobStarted", "runnerId": "not-a-number"},
        {"messageType": "JobAssigned"},
    ]
    with caplog.at_level(logging.WARNING, logger="shared.actions"):
        message = RunnerScaleSetMessage.from_wire(_envelope(jobs))
    assert [type(j) for j in message.jobs] == [JobAssigned]
    assert "malformed JobStarted" in caplog.text
    assert "not-a-number" not in caplog.text


def test_unknown_envelope_type_has_no_jobs(caplog: pytest.LogCaptureFixture) -> None:
    raw = _envelope([{"messageType": "JobAssigned"}], messageType="SomethingNew")
    with caplog.at_level(logging.WARNING, logger="shared.actions"):
        message = RunnerScaleSetMessage.from_wire(raw)
    assert message.jobs == []
    assert message.message_id == 100000171
    assert "SomethingNew" in caplog.text


@pytest.mark.parametrize("body", ["", "   ", "null", "{}", "[not json", '"text"'])
def test_body_without_array_gives_no_jobs(body: str) -> None:
    assert decode_job_messages(body) == []


def test_missing_statistics_is_none() -> None:
    message = RunnerScaleSetMessage.from_wire(
        {"messageId": 1, "messageType": "RunnerScaleSetJobMessages"}
    )
    assert message.statistics is None
    assert message.jobs == []


@pytest.mark.parametrize("value", [None, "", "0001-01-01T00:00:00Z"])
def test_zero_times_are_none(value: str | None) -> None:
    job = JobCompleted.from_wire({"messageType": "JobCompleted", "runnerAssignTime": value})
    assert job.runner_assign_time is None


def test_numeric_job_id_becomes_string() -> None:
    job = JobAssigned.from_wire({"messageType": "JobAssigned", "jobId": 12})
    assert job.job_id == "12"


def test_session_masks_its_token() -> None:
    session = RunnerScaleSetSession.from_wire(
        {
            "sessionId": "b3c1d4f0-0000-4000-8000-000000000001",
            "ownerName": "host",
            "runnerScaleSet": {"id": 1, "name": "ScaleSet"},
            "messageQueueUrl": "https://broker/message",
            "messageQueueAccessToken": "mq-secret-token",
            "statistics": STATS,
        }
    )
    assert "mq-secret-token" not in repr(session)
    assert "mq-secret-token" not in json.dumps(session.to_wire())
    assert session.message_queue_access_token.get_secret_value() == "mq-secret-token"
    assert session.runner_scale_set is not None
    assert session.runner_scale_set.id == 1


def test_jit_config_masks_blob() -> None:
    config = JitRunnerConfig.from_wire(
        {"runner": {"id": 5, "name": "r", "runnerScaleSetId": 1}, "encodedJITConfig": "blob=="}
    )
    assert "blob==" not in repr(config)
    assert config.runner.runner_scale_set_id == 1


def test_scale_set_reads_capitalised_runner_setting() -> None:
    scale_set = RunnerScaleSet.from_wire(
        {"id": 3, "RunnerSetting": {"disableUpdate": True}, "createdOn": "2026-01-01T00:00:00Z"}
    )
    assert scale_set.runner_setting.disable_update
    assert scale_set.created_on == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("scale_set", "body"),
    [
        (
            RunnerScaleSet(
                name="arc",
                runner_group_id=1,
                labels=[Label(name="arc"), Label(name="gpu", type="")],
                runner_setting=RunnerSetting(disable_update=True),
            ),
            {
                "name": "arc",
                "runnerGroupId": 1,
                "labels": [{"type": "System", "name": "arc"}, {"type": "System", "name": "gpu"}],
                "RunnerSetting": {"disableUpdate": True},
                "createdOn": "0001-01-01T00:00:00Z",
            },
        ),
        (
            RunnerScaleSet(runner_group_id=2),
            {
                "runnerGroupId": 2,
                "RunnerSetting": {"disableUpdate": False},
                "createdOn": "0001-01-01T00:00:00Z",
            },
        ),
    ],
)
def test_request_body_like_go(scale_set: RunnerScaleSet, body: dict[str, Any]) -> None:
    assert scale_set.request_body() == body


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ({"runnerRequestId": "12", "jobId": 3.5}, (12, "3.5")),
        ({"runnerRequestId": 12.0, "workflowRunId": True}, (12, "")),
    ],
)
def test_numbers_convert_as_pydantic_lax_mode_did(raw: dict[str, Any], value: Any) -> None:
    job = JobAssigned.from_wire({"messageType": "JobAssigned", **raw})
    assert (job.runner_request_id, job.job_id) == value


@pytest.mark.parametrize(
    ("model", "raw", "why"),
    [
        (JobStarted, {"runnerId": "r-secret-1"}, "runnerId: expected an integer"),
        (JobStarted, {"runnerId": 1.5}, "runnerId: expected an integer"),
        (JobStarted, {"messageType": "JobCompleted"}, "messageType: expected one of"),
        (JobStarted, {"requestLabels": "r-secret-1"}, "requestLabels: expected an array"),
        (JobStarted, {"requestLabels": ["a", None]}, r"requestLabels\[1\]: expected a string"),
        (JobStarted, {"queueTime": "r-secret-1"}, "queueTime: expected an RFC 3339 time"),
        (RunnerScaleSet, {"name": 7}, "name: expected a string"),
        (RunnerScaleSet, {"RunnerSetting": {"disableUpdate": 2}}, "RunnerSetting.disableUpdate"),
        (RunnerScaleSet, {"statistics": []}, "statistics: expected an object"),
        (RunnerScaleSetMessage, {"messageType": "x"}, "messageId: is required"),
        (Statistics, "r-secret-1", "the value: expected an object"),
    ],
)
def test_a_wrong_field_is_named_without_its_value(model: Any, raw: Any, why: str) -> None:
    with pytest.raises(WireError, match=why) as caught:
        model.from_wire(raw)
    assert "r-secret-1" not in str(caught.value)
