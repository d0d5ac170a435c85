"""The watch stream's handling of what a server should never send, on a tiny aiohttp server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from shared.kube.client import configuration_from_dict
from shared.kube.errors import Gone, ServerError, Timeout
from shared.kube.objects import CONFIG_MAP, Objects

ServerFactory = Callable[[web.Application], Coroutine[Any, Any, TestServer]]


def event(kind: str, name: str, rv: str) -> bytes:
    obj = {
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
    }
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


async def stream(
    lines: list[bytes],
    aiohttp_server: ServerFactory,
    *,
    stall: asyncio.Event | None = None,
    inactivity: float = 5.0,
    refusal: web.Response | None = None,
) -> list[dict[str, Any]]:
    """The events a watch yields from a server writing `lines`, then (with `stall`) nothing
    at all until `stall` is set, as a half-open connection would; or its `refusal`."""

    async def watch(request: web.Request) -> web.StreamResponse:
        if refusal is not None:
            return refusal
        resp = web.StreamResponse()
        await resp.prepare(request)
        for line in lines:
            await resp.write(line)
        if stall is not None:
            await stall.wait()
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps", watch)
    server = await aiohttp_server(app)
    kubeconfig = {
        "clusters": [{"name": "c", "cluster": {"server": str(server.make_url(""))}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    async with client.ApiClient(await configuration_from_dict(kubeconfig)) as api:
        events = Objects(api, timeout=5).watch(
            CONFIG_MAP, "ns", resource_version="1", timeout_seconds=5, inactivity_timeout=inactivity
        )
        got: list[dict[str, Any]] = []
        async with contextlib.aclosing(events):
            try:
                async for e in events:
                    got.append(e)
            finally:
                if stall is not None:
                    stall.set()
        return got


async def test_malformed_lines_are_skipped(aiohttp_server: ServerFactory) -> None:
    lines = [event("ADDED", "a", "2"), b"{not json\n", b"[1, 2]\n", b"\n", event("ADDED", "b", "3")]
    got = await stream(lines, aiohttp_server)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a", "b"]


async def test_an_error_event_raises_its_status(aiohttp_server: ServerFactory) -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    with pytest.raises(Gone):
        await stream([event("ADDED", "a", "2"), json.dumps(gone).encode() + b"\n"], aiohttp_server)


async def test_a_stalled_stream_raises_timeout_after_the_inactivity_limit(
    aiohttp_server: ServerFactory,
) -> None:
    with pytest.raises(Timeout):
        await stream(
            [event("ADDED", "a", "2")], aiohttp_server, stall=asyncio.Event(), inactivity=0.3
        )


def too_many_requests(retry_after_seconds: int) -> dict[str, Any]:
    return {
        "kind": "Status",
        "status": "Failure",
        "message": "storage is (re)initializing",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": retry_after_seconds},
        "code": 429,
    }


@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"Retry-After": "2"}, 2.0), ({}, 5.0), ({"Retry-After": "soon"}, 5.0)],
    ids=["header", "details", "bad-header"],
)
async def test_a_refused_watch_carries_the_delay_the_server_asked_for(
    aiohttp_server: ServerFactory, headers: dict[str, str], expected: float
) -> None:
    refusal = web.json_response(too_many_requests(5), status=429, headers=headers)
    with pytest.raises(ServerError) as exc:
        await stream([], aiohttp_server, refusal=refusal)
    assert (exc.value.code, exc.value.retry_after) == (429, expected)


async def test_an_error_event_carries_the_delay_its_status_asks_for(
    aiohttp_server: ServerFactory,
) -> None:
    refused = {"type": "ERROR", "object": too_many_requests(3)}
    with pytest.raises(ServerError) as exc:
        await stream([json.dumps(refused).encode() + b"\n"], aiohttp_server)
    assert exc.value.retry_after == 3.0
