"""What every part of the HTTP layer shares: JSON answers, body decoding, query booleans and
the per-request keys."""

from __future__ import annotations

import json
from typing import Any

import yaml
from aiohttp import web

from sandbox.kube import protobuf
from sandbox.kube.rbac import User
from sandbox.kube.status import ApiError, bad_request

Obj = dict[str, Any]

# The caller, once authenticated (and impersonated).
USER = web.RequestKey("user", User)
# Set once a request was recorded in the accounting (a watch is, when it is established).
ACCOUNTED = web.RequestKey("accounted", bool)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def json_response(
    obj: Any, status: int = 200, *, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=dumps(obj), status=status, content_type="application/json", headers=headers
    )


def typed_response(obj: Obj, content_type: str) -> web.Response:
    """A JSON answer under a content type with parameters (aiohttp's would drop them)."""
    resp = web.Response(body=dumps(obj), status=200)
    resp.headers["Content-Type"] = content_type
    return resp


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code, headers=err.headers)


def go_bool(value: str | None) -> bool:
    """strconv-style query booleans: absent, "0" and any case of "false" are false."""
    if value is None:
        return False
    return value.lower() not in ("0", "false")


async def read_body(request: web.Request) -> Any:
    """The request body decoded by its content type: protobuf, YAML or JSON (None if empty)."""
    raw = await request.read()
    ctype = request.content_type
    try:
        if ctype == protobuf.PROTOBUF:
            return protobuf.decode(raw)
        if "yaml" in ctype:
            return yaml.safe_load(raw)
        return json.loads(raw) if raw else None
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"unable to decode the request body: {exc}") from exc
