"""The Actions client's error vocabulary.

Callers never see aiohttp exceptions: every failure is an `ActionsError` subclass with the
original exception chained as `__cause__`. Messages name the method, URL, status, the service's
`typeName` and diagnostic ids, and never a token, key or JIT config: they are redacted, and the
client also replaces every credential it holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.telemetry.logs import REDACTED, redact
from shared.wire import DecodeError, decode_json

_MAX_DETAIL = 500


class ActionsError(Exception):
    """Any failure talking to GitHub or the Actions service."""

    retryable = False
    """True when the same call may succeed later without any change (5xx, 429, network)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        type_name: str = "",
        activity_id: str = "",
        github_request_id: str = "",
    ) -> None:
        # Redacted as a log line is, whoever built the message: it goes on to logs, spans,
        # Events and status conditions.
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.type_name = type_name
        self.activity_id = activity_id
        self.github_request_id = github_request_id


class InvalidArgument(ActionsError, ValueError):
    """The caller's input is unusable; nothing was sent."""


class InvalidConfigURL(InvalidArgument):
    """The configuration URL does not point to an enterprise, an organization or a repository."""


class InvalidCredentials(InvalidArgument):
    """Neither a usable PAT nor complete, parseable GitHub App credentials."""


class ActionsConnectionError(ActionsError):
    """No HTTP answer: connection refused or reset, timeout, TLS failure (after retries)."""

    retryable = True


class ActionsServerError(ActionsError):
    """5xx or 429 still answered after every retry."""

    retryable = True


class UnexpectedResponse(ActionsError):
    """A success status whose body is not what the endpoint returns."""


class AuthenticationFailed(ActionsError):
    """GitHub refused a step of the token chain (App token, registration token, registration)."""


class TokenExpired(ActionsError):
    """401 from the Actions service: the admin token was not accepted."""


class MessageQueueTokenExpired(TokenExpired):
    """401 from a message-queue call even after the session was refreshed."""


class NotFound(ActionsError):
    """The addressed object does not exist."""


class RunnerNotFound(NotFound):
    """`AgentNotFoundException`, or 404 on a runner."""


class ScaleSetNotFound(NotFound):
    """404 on a runner scale set."""


class RunnerGroupNotFound(NotFound):
    """No runner group has the requested name."""


class SessionNotFound(NotFound):
    """404 on a message session (it was deleted or evicted)."""


class AmbiguousName(ActionsError):
    """A by-name lookup matched more than one object."""


class RunnerExists(ActionsError):
    """`AgentExistsException`: a runner with that name is already registered."""


class JobStillRunning(ActionsError):
    """`JobStillRunningException`: the runner is busy and cannot be removed now."""


class SessionConflict(ActionsError):
    """409 `RunnerScaleSetSessionConflictException`: another listener holds the session."""


class SessionExpired(ActionsError):
    """`RunnerScaleSetSessionExpiredException`: the session identifier is no longer valid."""


# Substring of the service's `typeName` -> error class; the first match wins.
_BY_TYPE_NAME: tuple[tuple[str, type[ActionsError]], ...] = (
    ("AgentExistsException", RunnerExists),
    ("AgentNotFoundException", RunnerNotFound),
    ("JobStillRunningException", JobStillRunning),
    ("RunnerScaleSetSessionConflictException", SessionConflict),
    ("RunnerScaleSetSessionExpiredException", SessionExpired),
    ("RunnerScaleSetNotFoundException", ScaleSetNotFound),
    ("RunnerGroupNotFoundException", RunnerGroupNotFound),
)


_BY_STATUS: dict[int, type[ActionsError]] = {401: TokenExpired, 404: NotFound}


def scrub(text: str, secrets: frozenset[str] = frozenset()) -> str:
    """`text` without any of `secrets` nor anything secret-shaped."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return redact(text)


def _detail(body: bytes, content_type: str) -> tuple[str, str]:
    """(typeName, human detail) of an error body."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return "", "unknown error"
    if "text/plain" in content_type:
        return "", text
    try:
        # Read under the transport's cap already.
        payload = decode_json(text, limit=len(text), what="the error body")
    except DecodeError:
        return "", f"unparsable error body: {text[:200]!r}"
    if not isinstance(payload, dict):
        return "", text
    type_name = str(payload.get("typeName") or "")
    message = str(payload.get("message") or "")
    if type_name:
        return type_name, f"{type_name}: {message}"
    return "", message or text


def error_from_response(
    *,
    method: str,
    url: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    by_status: Mapping[int, type[ActionsError]] | None = None,
    secrets: frozenset[str] = frozenset(),
    attempts: int = 1,
) -> ActionsError:
    """The typed error for a non-success response.

    The service's `typeName` decides first; then the status, through `by_status` (the caller
    knows what was addressed: a 404 on a runner is `RunnerNotFound`) over the defaults (401
    `TokenExpired`, 404 `NotFound`, 429 and 5xx `ActionsServerError`).
    """
    type_name, detail = _detail(body, headers.get("Content-Type", ""))
    activity_id = headers.get("ActivityId", "")
    request_id = headers.get("X-GitHub-Request-Id", "")
    cls: type[ActionsError] = ActionsError
    for needle, candidate in _BY_TYPE_NAME:
        if needle in type_name:
            cls = candidate
            break
    else:
        overrides = by_status or {}
        if status in overrides:
            cls = overrides[status]
        elif status in _BY_STATUS:
            cls = _BY_STATUS[status]
        elif status == 429 or status >= 500:
            cls = ActionsServerError
    ids = "".join(
        f", {name}={value!r}"
        for name, value in (("activity_id", activity_id), ("github_request_id", request_id))
        if value
    )
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if len(detail) > _MAX_DETAIL:
        detail = detail[:_MAX_DETAIL] + "..."
    message = f"{method} {url} failed{tries} (status={status}{ids}): {detail}"
    return cls(
        scrub(message, secrets),
        status=status,
        type_name=type_name,
        activity_id=activity_id,
        github_request_id=request_id,
    )
