"""The paths outside /api/{v}/... and /apis/{g}/{v}/...: discovery, /version, health, OpenAPI."""

from __future__ import annotations

from aiohttp import web

from sandbox.kube import discovery, openapi
from sandbox.kube.resources import Catalog
from sandbox.kube.server.wire import json_response, typed_response
from sandbox.kube.status import unknown_path

AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def non_resource(request: web.Request, *, catalog: Catalog, host: str) -> web.Response:
    path = request.path.rstrip("/") or "/"
    accept = request.headers.get("Accept", "")
    wants_aggregated = "as=APIGroupDiscoveryList" in accept
    if path == "/api":
        if wants_aggregated:
            return typed_response(discovery.aggregated(catalog, core=True), AGGREGATED_TYPE)
        return json_response(discovery.api_versions(host))
    if path == "/apis":
        if wants_aggregated:
            return typed_response(discovery.aggregated(catalog, core=False), AGGREGATED_TYPE)
        return json_response(discovery.group_list(catalog))
    if path == "/version":
        return json_response(discovery.VERSION_INFO)
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/openapi/v2":
        return web.Response(body=b"", content_type="application/octet-stream")
    if path == "/openapi/v3":
        return json_response(openapi.index(catalog))
    if path.startswith("/openapi/v3/"):
        doc = openapi.document(catalog, path.removeprefix("/openapi/v3/"))
        if doc is None:
            raise unknown_path()
        return json_response(doc)
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) == 2:
        doc = discovery.resource_list(catalog, group="", version=parts[1])
    elif parts[0] == "apis" and len(parts) == 2:
        doc = discovery.api_group(catalog, parts[1])
    elif parts[0] == "apis" and len(parts) == 3:
        doc = discovery.resource_list(catalog, group=parts[1], version=parts[2])
    else:
        doc = None
    if doc is None:
        raise unknown_path()
    return json_response(doc)
