"""The project's Kubernetes error vocabulary.

Business code never catches kubernetes_asyncio or aiohttp exceptions: `translate` maps them onto
these classes, keeping the original as `__cause__`. Messages carry the server's Status message,
never a request body (which may hold a JIT config or token).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import aiohttp

from shared.retryafter import retry_after_seconds
from shared.telemetry.logs import redact
from shared.wire import DecodeError, decode_json

if TYPE_CHECKING:
    from kubernetes_asyncio.client.exceptions import ApiException

# kubernetes-asyncio's module, once something imported it: its package imports every model, so
# this module never imports it itself (docs/listener.md#memory); an ApiException can only exist
# when the module is loaded.
_CLIENT_EXCEPTIONS = "kubernetes_asyncio.client.exceptions"

MAX_STATUS_BYTES = 2**20
"""The cap on an error answer: a Status is a few hundred bytes, with its causes a few KiB."""


class KubeError(Exception):
    """Any failure talking to the Kubernetes API server."""

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        code: int = 0,
        reason: str = "",
        status_message: str = "",
        retry_after: float | None = None,
    ) -> None:
        # A Status message can echo a field's value, a credential's too: redacted as a log line
        # is, since the message goes on to logs, spans, Events and status conditions.
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        # Seconds the server asked us to wait before trying again (a 429's `Retry-After`).
        self.retry_after = retry_after
        # The server's own words without the code and reason that start `message`: ARC quotes
        # them so in a runner's status.
        self.status_message = redact(status_message) if status_message else message


class NotFound(KubeError):
    """404: the object (or its kind) does not exist."""


class Conflict(KubeError):
    """409: a stale resourceVersion, or AlreadyExists on create."""


class AlreadyExists(Conflict):
    """409 AlreadyExists on create."""


class Invalid(KubeError):
    """422 or 400: the server rejected the object or the patch."""


class Forbidden(KubeError):
    """403: RBAC denies the request."""


class NamespaceTerminating(Forbidden):
    """403 from the namespace lifecycle admission, not RBAC: a create in a namespace being
    deleted (cause `NamespaceTerminating`). Expected while a namespace goes; the owner's
    deletion follows."""


class InvalidName(KubeError):
    """A namespace or name that is not one for its kind (docs/security.md#names-from-tenants):
    refused before any request, as client-go refuses it, so that no name becomes another path.
    """


class Unauthorized(KubeError):
    """401: the credentials were not accepted."""


class Gone(KubeError):
    """410: a watch or list resourceVersion fell out of the server's history."""


class ServerError(KubeError):
    """5xx or 429: the server could not answer now; retry with backoff."""

    retryable = True


class BadResponse(KubeError):
    """The answer could not be used: over its size cap, or not the JSON it should be
    (`shared.wire`). Nothing of it was applied; like a server error, retry with backoff."""

    retryable = True


class Timeout(KubeError):
    """No answer within the request timeout, or the connection failed."""

    retryable = True


_BY_CODE: dict[int, type[KubeError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    400: Invalid,
}


def _status(body: Any) -> dict[str, Any]:
    if isinstance(body, bytes | str):
        try:
            body = decode_json(body, limit=MAX_STATUS_BYTES, what="the Status")
        except DecodeError:
            return {}
    return body if isinstance(body, dict) else {}


def _namespace_terminating(details: Any) -> bool:
    causes = details.get("causes") if isinstance(details, dict) else None
    return any(
        isinstance(cause, dict) and cause.get("reason", cause.get("type")) == "NamespaceTerminating"
        for cause in causes or []
    )


def from_status(code: int, reason: str, body: Any, *, retry_after: str | None = None) -> KubeError:
    """The error class for an HTTP status, with the server's Status message from `body`, and
    the delay the server asked for: the `retry_after` header, else the Status's
    `details.retryAfterSeconds`."""
    status = _status(body)
    message, status_reason = str(status.get("message", "")), str(status.get("reason", ""))
    details = status.get("details")
    delay = retry_after_seconds(retry_after)
    if delay is None and isinstance(details, dict):
        delay = retry_after_seconds(details.get("retryAfterSeconds"))
    reason = status_reason or reason
    text = message or reason or f"HTTP {code}"
    cls: type[KubeError]
    if code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif code == 403 and _namespace_terminating(details):
        cls = NamespaceTerminating
    elif code == 429 or code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, KubeError)
    return cls(
        f"{code} {reason}: {text}" if reason else f"{code}: {text}",
        code=code,
        reason=reason,
        status_message=text,
        retry_after=delay,
    )


def from_api_exception(exc: ApiException) -> KubeError:
    """The error class for a kubernetes-asyncio ApiException, with the server's Status message."""
    return from_status(
        int(exc.status or 0), exc.reason if isinstance(exc.reason, str) else "", exc.body
    )


def translate(exc: BaseException) -> KubeError | None:
    """Map a client-library exception onto the vocabulary, or None if it is not one."""
    if isinstance(exc, KubeError):
        return exc
    client_exceptions = sys.modules.get(_CLIENT_EXCEPTIONS)
    if client_exceptions is not None and isinstance(exc, client_exceptions.ApiException):
        return from_api_exception(exc)
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return Timeout("request timed out")
    if isinstance(exc, aiohttp.ClientResponseError):
        return ServerError(f"{exc.status}: {exc.message}", code=exc.status)
    if isinstance(exc, aiohttp.ClientError):
        return Timeout(f"connection failed: {type(exc).__name__}")
    return None


@contextlib.asynccontextmanager
async def kube_errors() -> AsyncIterator[None]:
    """Re-raise client-library errors inside the block as KubeError subclasses."""
    try:
        yield
    except Exception as exc:
        mapped = translate(exc)
        if mapped is None or mapped is exc:
            raise
        raise mapped from exc
