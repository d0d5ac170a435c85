"""An informer whose watch stream stalls (a half-open connection: open, silent, no EOF) notices
through its inactivity watchdog, resumes, and converges.

The stall is made by a small HTTP proxy in front of the emulator: every request is forwarded,
and `stall()` freezes the watch streams open at that moment, as a dead peer behind a NAT would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from controller.runtime import Informer, WatchSettings
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.client import configuration_from_dict
from shared.kube.objects import Objects
from tests.controller.runtime.conftest import eventually, runner_body

ServerFactory = Callable[[web.Application], Coroutine[Any, Any, TestServer]]
FORWARDED = ("authorization", "content-type", "accept")


class StallingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.session = aiohttp.ClientSession()
        self._open: set[asyncio.Event] = set()
        self._released = asyncio.Event()

    def stall(self) -> None:
        """Freeze every watch stream open now; later streams flow normally."""
        for frozen in self._open:
            frozen.set()

    def release(self) -> None:
        self._released.set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
        body = await request.read()
        async with self.session.request(
            request.method, self.upstream + request.path_qs, data=body or None, headers=headers
        ) as upstream:
            resp = web.StreamResponse(
                status=upstream.status,
                headers={"Content-Type": upstream.headers.get("Content-Type", "application/json")},
            )
            await resp.prepare(request)
            frozen = asyncio.Event()
            self._open.add(frozen)
            try:
                async for line in upstream.content:
                    if frozen.is_set():
                        await self._released.wait()
                        return resp
                    await resp.write(line)
            finally:
                self._open.discard(frozen)
            await resp.write_eof()
            return resp


@pytest.fixture
async def proxy(
    kube: KubeEmulator, aiohttp_server: ServerFactory
) -> AsyncIterator[tuple[StallingProxy, TestServer]]:
    stalling = StallingProxy(kube.url)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stalling.handle)
    try:
        server = await aiohttp_server(app)
        yield stalling, server
    finally:
        stalling.release()
        await stalling.session.close()


async def test_a_stalled_watch_is_abandoned_and_the_cache_converges(
    kube: KubeEmulator, objects: Objects, ns: str, proxy: tuple[StallingProxy, TestServer]
) -> None:
    stalling, server = proxy
    kubeconfig = kube.kubeconfig_dict()
    kubeconfig["clusters"][0]["cluster"]["server"] = str(server.make_url("")).rstrip("/")
    async with client.ApiClient(await configuration_from_dict(kubeconfig)) as api:
        informer = Informer(
            objects=Objects(api, timeout=5.0),
            kind=EPHEMERAL_RUNNER,
            namespaces=[ns],
            settings=WatchSettings(inactivity_timeout=1.0, retry_base=0.05, retry_max=0.2),
        )
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 10)
            await objects.create(EPHEMERAL_RUNNER, ns, runner_body("before"))

            async def cached(name: str) -> bool:
                return informer.store.get(ns, name) is not None

            await eventually(lambda: cached("before"))
            failures = informer.failures
            stalling.stall()
            await objects.create(EPHEMERAL_RUNNER, ns, runner_body("during"))
            await objects.delete(EPHEMERAL_RUNNER, ns, "before")

            async def converged() -> bool:
                return await cached("during") and not await cached("before")

            await eventually(converged)
            assert informer.failures > failures
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
