"""Request paths parsed the way the apiserver's RequestInfoFactory does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sandbox.kube.server.wire import go_bool
from sandbox.kube.status import unknown_path

NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass
class RequestInfo:
    verb: str
    path: str
    resource_request: bool
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""


def parse_path(method: str, path: str, *, query: Any) -> RequestInfo:
    parts = [p for p in path.split("/") if p]
    http_verb = {
        "GET": "get",
        "HEAD": "get",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method, method.lower())
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(http_verb, path, False)
    if parts[0] == "api":
        if len(parts) < 3:
            return RequestInfo(http_verb, path, False)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return RequestInfo(http_verb, path, False)
        group, version, rest = parts[1], parts[2], parts[3:]
    info = RequestInfo(http_verb, path, True, group=group, version=version)
    if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
        info.namespace = rest[1]
        rest = rest[2:]
    info.resource = rest[0]
    if len(rest) > 1:
        info.name = rest[1]
    if len(rest) > 2:
        info.subresource = rest[2]
    if len(rest) > 3:
        raise unknown_path()
    if not info.name:
        if method == "GET":
            info.verb = "watch" if go_bool(query.get("watch")) else "list"
        elif method == "DELETE":
            info.verb = "deletecollection"
    return info
