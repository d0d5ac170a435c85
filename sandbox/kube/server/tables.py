"""kubectl's `meta.k8s.io/v1` Tables (`Accept: ...;as=Table`), for reads and watch events."""

from __future__ import annotations

from aiohttp import web

from sandbox.kube import discovery
from sandbox.kube.clock import Clock
from sandbox.kube.resources import ResourceType
from sandbox.kube.server.wire import Obj, dumps, json_response


def wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def maybe_table(
    request: web.Request,
    rt: ResourceType,
    *,
    items: list[Obj],
    plain: Obj,
    single: bool,
    clock: Clock,
) -> web.Response:
    """`plain` (an object or a list), or the Table of `items` when the client asks for one."""
    if not wants_table(request):
        return json_response(plain)
    meta = {} if single else plain["metadata"]
    if single:
        meta = {"resourceVersion": plain["metadata"].get("resourceVersion", "")}
    include = request.query.get("includeObject", "Object")
    table = discovery.table(rt, items, list_meta=meta, now=clock())
    for row in table["rows"]:
        if include == "None":
            row.pop("object")
        elif include == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": row["object"]["metadata"],
            }
    return json_response(table)


def event_line(
    request: web.Request, rt: ResourceType, *, etype: str, obj: Obj, clock: Clock
) -> bytes:
    """One watch event line: the object, or its one-row Table for `get -w`."""
    if wants_table(request) and etype in ("ADDED", "MODIFIED", "DELETED"):
        table = discovery.table(
            rt,
            [obj],
            list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
            now=clock(),
        )
        return dumps({"type": etype, "object": table})
    return dumps({"type": etype, "object": obj})
