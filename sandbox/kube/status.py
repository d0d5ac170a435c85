"""The Status error object and the errors the emulator answers with
(docs/sandbox-kube.md#errors).

Messages follow apimachinery's `errors.go` word for word, because clients (kubectl, leader
election, our own error mapping) match on reason, code and sometimes the message text.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


class ApiError(Exception):
    """An error answered to the client as a `Status` object with an HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        *,
        message: str,
        details: Obj | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            # A Status a storage returns as its result carries no reason (the eviction's 500).
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def qualified(plural: str, group: str) -> str:
    """`plural.group`, or just `plural` for the core group (GroupResource.String())."""
    return f"{plural}.{group}" if group else plural


def _details(plural: str, *, group: str, name: str) -> Obj:
    details: Obj = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def not_found(plural: str, *, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        message=f'{qualified(plural, group)} "{name}" not found',
        details=_details(plural, group=group, name=name),
    )


def unknown_path() -> ApiError:
    return ApiError(
        404, "NotFound", message="the server could not find the requested resource", details={}
    )


def already_exists(plural: str, *, group: str, name: str, deleting: bool = False) -> ApiError:
    prefix = "object is being deleted: " if deleting else ""
    return ApiError(
        409,
        "AlreadyExists",
        message=f'{prefix}{qualified(plural, group)} "{name}" already exists',
        details=_details(plural, group=group, name=name),
    )


def conflict(plural: str, *, group: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        message=f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        details=_details(plural, group=group, name=name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class Cause:
    """One field error of an Invalid answer: `field: Type: detail`."""

    TYPES = {
        "FieldValueInvalid": "Invalid value",
        "FieldValueRequired": "Required value",
        "FieldValueForbidden": "Forbidden",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueTypeInvalid": "Invalid value",
        "FieldValueDuplicate": "Duplicate value",
        "FieldValueNotFound": "Not found",
        "FieldValueTooLong": "Too long",
    }

    def __init__(self, reason: str, *, field: str, detail: str = "") -> None:
        self.reason = reason
        self.field = field
        self.detail = detail

    @property
    def message(self) -> str:
        kind = self.TYPES.get(self.reason, "Invalid value")
        return f"{kind}: {self.detail}" if self.detail else kind

    def render(self) -> str:
        return f"{self.field}: {self.message}"


def invalid(kind: str, *, group: str, name: str, causes: list[Cause]) -> ApiError:
    qualified_kind = f"{kind}.{group}" if group else kind
    if len(causes) == 1:
        summary = causes[0].render()
    else:
        summary = "[" + ", ".join(c.render() for c in causes) + "]"
    details: Obj = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {"reason": c.reason, "message": c.message, "field": c.field} for c in causes
    ]
    return ApiError(
        422, "Invalid", message=f'{qualified_kind} "{name}" is invalid: {summary}', details=details
    )


def forbidden(plural: str, *, group: str, name: str, why: str) -> ApiError:
    gr = qualified(plural, group)
    subject = f'{gr} "{name}"' if name else gr
    return ApiError(
        403,
        "Forbidden",
        message=f"{subject} is forbidden: {why}",
        details=_details(plural, group=group, name=name),
    )


def namespace_terminating(plural: str, *, group: str, name: str, namespace: str) -> ApiError:
    """A create in a namespace being deleted, refused by the NamespaceLifecycle admission (not
    RBAC): 403 with the cause `NamespaceTerminating` on `metadata.namespace`."""
    error = forbidden(
        plural,
        group=group,
        name=name,
        why=f"unable to create new content in namespace {namespace} because it is being terminated",
    )
    assert error.details is not None
    error.details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return error


def forbidden_path(why: str) -> ApiError:
    return ApiError(403, "Forbidden", message=f"forbidden: {why}", details={})


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", message="Unauthorized")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message=message)


def method_not_allowed(action: str, *, plural: str, group: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        message=f'{action} is not supported on resources of kind "{qualified(plural, group)}"',
        details={"group": group, "kind": plural} if group else {"kind": plural},
    )


def unsupported_media(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        message="the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message=message)


def too_old(rv: int, current: int) -> ApiError:
    return expired(f"too old resource version: {rv} ({current})")


def too_many_requests(
    retry_after: int,
    *,
    message: str = "the server has received too many requests and has asked us to try again later",
) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        message=message,
        details={"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def storage_initializing() -> ApiError:
    """What a watch (or a list the watch cache serves) gets while that cache is not initialised
    yet: after the API server (re)starts, or re-initialises it after etcd trouble."""
    return too_many_requests(1, message="storage is (re)initializing")


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        message=f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def timeout(message: str) -> ApiError:
    return ApiError(504, "Timeout", message=f"Timeout: {message}", details={})


def service_unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message=message)


def for_code(code: int, what: str, *, message: str = "") -> ApiError:
    """An injected fault: the error a real server answers with this code, with `message` as
    its Status message when one is given."""
    error = _injected(code, what)
    if message:
        return ApiError(error.code, error.reason, message=message, headers=error.headers)
    return error


def _injected(code: int, what: str) -> ApiError:
    injected = f"injected fault on {what}"
    if code == 400:
        return bad_request(injected)
    if code == 401:
        return unauthorized()
    if code == 403:
        return forbidden_path(injected)
    if code == 404:
        return unknown_path()
    if code == 409:
        return ApiError(409, "Conflict", message=injected)
    if code == 410:
        return expired(injected)
    if code == 429:
        return too_many_requests(1)
    if code == 500:
        return internal(injected)
    if code == 503:
        return service_unavailable(injected)
    if code == 504:
        return timeout(injected)
    return ApiError(code, "Unknown", message=f"injected fault on {what}")
