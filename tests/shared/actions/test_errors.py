"""Mapping of error responses onto the typed errors, and their messages."""

from __future__ import annotations

import json

import pytest

from shared.actions import (
    ActionsError,
    ActionsServerError,
    JobStillRunning,
    MessageQueueTokenExpired,
    NotFound,
    RunnerExists,
    RunnerNotFound,
    ScaleSetNotFound,
    SessionConflict,
    SessionExpired,
    TokenExpired,
)
from shared.actions.errors import error_from_response

JSON = {"Content-Type": "application/json"}
URL = "https://svc.example/tenant/123/_apis/x?api-version=6.0-preview"


def _exception(type_name: str, message: str = "boom") -> bytes:
    return json.dumps({"typeName": type_name, "message": message}).encode()


@pytest.mark.parametrize(
    ("status", "type_name", "expected"),
    [
        (400, "GitHub.DistributedTask.WebApi.AgentExistsException", RunnerExists),
        (409, "GitHub.DistributedTask.WebApi.AgentExistsException", RunnerExists),
        (404, "GitHub.DistributedTask.WebApi.AgentNotFoundException", RunnerNotFound),
        (400, "GitHub.DistributedTask.WebApi.JobStillRunningException", JobStillRunning),
        (
            409,
            "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException",
            SessionConflict,
        ),
        (
            400,
            "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionExpiredException",
            SessionExpired,
        ),
        (404, "GitHub.Actions.Runtime.WebApi.RunnerScaleSetNotFoundException", ScaleSetNotFound),
        (400, "GitHub.Some.OtherException", ActionsError),
    ],
)
def test_type_name_decides(status: int, type_name: str, expected: type[ActionsError]) -> None:
    error = error_from_response(
        method="GET", url=URL, status=status, headers=JSON, body=_exception(type_name)
    )
    assert type(error) is expected
    assert error.type_name == type_name
    assert error.status == status
    assert f"{type_name}: boom" in str(error)


@pytest.mark.parametrize(
    ("status", "by_status", "expected"),
    [
        (401, None, TokenExpired),
        (401, {401: MessageQueueTokenExpired}, MessageQueueTokenExpired),
        (404, None, NotFound),
        (404, {404: RunnerNotFound}, RunnerNotFound),
        (409, None, ActionsError),
        (409, {409: SessionConflict}, SessionConflict),
        (429, None, ActionsServerError),
        (500, None, ActionsServerError),
        (503, None, ActionsServerError),
        (400, None, ActionsError),
    ],
)
def test_status_decides_without_type_name(
    status: int, by_status: dict[int, type[ActionsError]] | None, expected: type[ActionsError]
) -> None:
    error = error_from_response(
        method="GET", url=URL, status=status, headers={}, body=b"", by_status=by_status
    )
    assert type(error) is expected


def test_server_error_is_retryable_and_client_error_is_not() -> None:
    server = error_from_response(method="GET", url=URL, status=503, headers={}, body=b"")
    client = error_from_response(method="GET", url=URL, status=400, headers={}, body=b"")
    assert server.retryable
    assert not client.retryable


@pytest.mark.parametrize(
    ("headers", "body", "detail"),
    [
        ({}, b"", "unknown error"),
        ({"Content-Type": "text/plain; charset=utf-8"}, b"capacity error", "capacity error"),
        (JSON, b'{"message":"test error"}', "test error"),
        (JSON, b"{not json", "unparsable error body: '{not json'"),
        (JSON, _exception("X.FooException", "bar"), "X.FooException: bar"),
    ],
)
def test_detail(headers: dict[str, str], body: bytes, detail: str) -> None:
    error = error_from_response(method="DELETE", url=URL, status=400, headers=headers, body=body)
    assert str(error).endswith(f": {detail}")
    assert str(error).startswith(f"DELETE {URL} failed (status=400")


def test_ids_and_attempts_in_message() -> None:
    error = error_from_response(
        method="GET",
        url=URL,
        status=503,
        headers={"ActivityId": "act-1", "X-GitHub-Request-Id": "req-2"},
        body=b"",
        attempts=5,
    )
    assert "after 5 attempts" in str(error)
    assert "activity_id='act-1'" in str(error)
    assert "github_request_id='req-2'" in str(error)
    assert (error.activity_id, error.github_request_id) == ("act-1", "req-2")


def test_long_detail_is_truncated() -> None:
    error = error_from_response(
        method="GET", url=URL, status=400, headers={"Content-Type": "text/plain"}, body=b"x" * 5000
    )
    assert len(str(error)) < 800


@pytest.mark.parametrize(
    "secret",
    [
        "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJydW5uZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
        "opaque-known-secret",
    ],
)
def test_secrets_never_in_message(secret: str) -> None:
    error = error_from_response(
        method="GET",
        url=URL,
        status=401,
        headers={"Content-Type": "text/plain"},
        body=f"token {secret} was refused".encode(),
        secrets=frozenset({"opaque-known-secret"}),
    )
    assert secret not in str(error)
    assert "[REDACTED]" in str(error)
