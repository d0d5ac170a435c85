"""Hostile answers of an API server to the real object client, from a tiny aiohttp server on
loopback: nested past any parser's stack, over the size caps (announced or streamed without a
length), invalid UTF-8, NaN, not an object. Each is a `BadResponse` (or the status's own error)
naming why, never a RecursionError or a UnicodeDecodeError; nothing over a cap is read, and a
watch ends rather than skip an event it could not read whole (docs/security.md, "Bad input")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from shared.kube.client import configuration_from_dict
from shared.kube.errors import BadResponse, KubeError, NotFound
from shared.kube.http import Connection, HttpApi
from shared.kube.objects import CONFIG_MAP, MAX_LIST_BYTES, MAX_OBJECT_BYTES, Objects

ServerFactory = Callable[[web.Application], Coroutine[Any, Any, TestServer]]
Handler = Callable[[web.Request], Coroutine[Any, Any, web.StreamResponse]]

DEEP = 100_000
NESTED = b"[" * DEEP + b"]" * DEEP
CONFIG_MAPS = "/api/v1/namespaces/ns/configmaps"


def event(kind: str, name: str) -> bytes:
    obj = {"kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@pytest_asyncio.fixture(params=["kubernetes-asyncio", "http"])
async def serve(
    request: pytest.FixtureRequest, aiohttp_server: ServerFactory
) -> AsyncIterator[Callable[[Handler], Coroutine[Any, Any, Objects]]]:
    """Objects over either client, talking to a server whose every answer is `handler`'s."""
    closing: list[Any] = []

    async def start(handler: Handler) -> Objects:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        server = await aiohttp_server(app)
        host = str(server.make_url("")).rstrip("/")
        api: Any
        if request.param == "http":
            api = HttpApi(Connection(host=host, ssl_context=None, token="t"), user_agent="t/0")
        else:
            kubeconfig = {
                "clusters": [{"name": "c", "cluster": {"server": host}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
            api = client.ApiClient(await configuration_from_dict(kubeconfig))
        closing.append(api)
        return Objects(api, timeout=10)

    yield start
    for api in closing:
        await api.close()


def answering(body: bytes, *, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, status=status, content_type="application/json")

    return handler


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (NESTED, "recursion limit exceeded"),
        (b'{"a":' * DEEP + b"1" + b"}" * DEEP, "recursion limit exceeded"),
        (b'{"kind": "ConfigMap", "data": {"a": "\xff\xfe"}}', "invalid unicode code point"),
        (b'{"kind": "ConfigMap", "metadata": {"generation": NaN}}', "expected value"),
        (b'{"kind": "ConfigMap", "metadata": {"generation": 1' + b"0" * 5000 + b"}}", "range"),
        (b'[{"kind": "ConfigMap"}]', "is not a JSON object"),
        (b"\xef\xbb\xbf" + NESTED, "recursion limit exceeded"),
    ],
    ids=["nested", "nested-objects", "utf-8", "nan", "huge-number", "array", "bom"],
)
async def test_a_hostile_object_is_a_bad_response(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]], body: bytes, why: str
) -> None:
    objects = await serve(answering(body))
    with pytest.raises(BadResponse, match=why) as caught:
        await objects.get(CONFIG_MAP, "ns", "a")
    assert f"GET {CONFIG_MAPS}/a" in str(caught.value)
    assert len(str(caught.value)) < 300


async def test_a_hostile_status_is_still_the_error_of_its_code(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]],
) -> None:
    objects = await serve(answering(NESTED, status=404))
    with pytest.raises(NotFound, match="404"):
        await objects.get(CONFIG_MAP, "ns", "a")


async def test_an_object_over_the_cap_is_refused_unread(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]],
) -> None:
    pad = "x" * MAX_OBJECT_BYTES
    body = json.dumps({"kind": "ConfigMap", "data": {"pad": pad}}).encode()
    objects = await serve(answering(body))
    with pytest.raises(BadResponse, match=r"announces 4\.0 MiB, over the cap of 4\.0 MiB"):
        await objects.get(CONFIG_MAP, "ns", "a")
    # A list of the same size is under the list cap.
    listing = await objects.list(CONFIG_MAP, "ns")
    assert len(listing["data"]["pad"]) == MAX_OBJECT_BYTES


STOP = 32 * 2**20
"""Where the "endless" body stops: a client without a cap reads it all and fails otherwise."""


def endless(sent: list[int], *, announce: int | None = None) -> Handler:
    """Streams `[` up to STOP, without a length (or announcing `announce` bytes)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if announce is not None:
            response.content_length = announce
        await response.prepare(request)
        chunk = b"[" * 2**16
        while sent[0] < STOP:
            await response.write(chunk)
            sent[0] += len(chunk)
        return response

    return handler


async def test_an_object_streamed_past_its_cap_is_cut_there(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]],
) -> None:
    sent = [0]
    objects = await serve(endless(sent))
    with pytest.raises(BadResponse, match=r"over the cap of 4\.0 MiB"):
        await objects.get(CONFIG_MAP, "ns", "a")
    # Socket buffers of both ends hold a few MiB more at most, never the endless rest.
    assert MAX_OBJECT_BYTES < sent[0] < 4 * MAX_OBJECT_BYTES


async def test_a_list_announcing_more_than_its_cap_is_not_read(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]],
) -> None:
    sent = [0]
    objects = await serve(endless(sent, announce=MAX_LIST_BYTES + 1))
    with pytest.raises(BadResponse, match="announces"):
        await objects.list(CONFIG_MAP, "ns")
    assert sent[0] < 16 * 2**20


async def watched(objects: Objects) -> tuple[list[str], BaseException | None]:
    names: list[str] = []
    events = objects.watch(
        CONFIG_MAP, "ns", resource_version="1", timeout_seconds=5, inactivity_timeout=5
    )
    try:
        async with contextlib.aclosing(events):
            async for e in events:
                names.append(e["object"]["metadata"]["name"])
    except KubeError as exc:
        return names, exc
    return names, None


def streaming(lines: list[bytes]) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for line in lines:
            await response.write(line)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    return handler


async def test_a_watch_skips_each_unreadable_event_with_one_line(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="shared.kube.objects")
    lines = [
        event("ADDED", "a"),
        NESTED + b"\n",
        b'{"type": "ADDED", "object": {"metadata": {"name": "\xff"}}}\n',
        b'{"type": "ADDED", "object": {"metadata": {"generation": NaN}}}\n',
        event("MODIFIED", "b"),
    ]
    objects = await serve(streaming(lines))
    assert await watched(objects) == (["a", "b"], None)
    skipped = [r.getMessage() for r in caplog.records]
    assert len(skipped) == 3
    assert all(
        line.startswith("watch event skipped: a watch event is not valid JSON") for line in skipped
    )


async def test_a_watch_error_event_with_a_hostile_code_is_a_server_error(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]],
) -> None:
    error = {"type": "ERROR", "object": {"code": "x" * 100, "message": "m"}}
    objects = await serve(streaming([event("ADDED", "a"), json.dumps(error).encode() + b"\n"]))
    names, exc = await watched(objects)
    assert names == ["a"]
    assert isinstance(exc, KubeError)
    assert exc.code == 500


@pytest.mark.parametrize("newline", [True, False], ids=["whole", "unterminated"])
async def test_a_watch_event_over_the_cap_ends_the_stream(
    serve: Callable[[Handler], Coroutine[Any, Any, Objects]], newline: bool
) -> None:
    huge = {"type": "MODIFIED", "object": {"metadata": {"name": "x" * MAX_OBJECT_BYTES}}}
    line = json.dumps(huge).encode() + (b"\n" if newline else b"")
    objects = await serve(streaming([event("ADDED", "a"), line, event("MODIFIED", "b")]))
    names, exc = await watched(objects)
    # Not skipped: its object would stay stale in every cache. The watcher retries from "a".
    assert names == ["a"]
    assert isinstance(exc, BadResponse)
    assert "over the cap of 4" in str(exc)
