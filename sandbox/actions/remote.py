"""Simulated runners for a Kubernetes emulator in another process.

The kubelet's runner containers are the Actions emulator's simulated runners
(`RunnerRuntime`); when the two emulators run in different processes (the scale benchmark gives
each its own, so that neither starves the other or the listener), the kubelet runs them through
`RemoteRuntime`, which asks the Actions emulator over one WebSocket (`/_admin/runtime`, beside
the other test controls): `{"op": "run", "id", "jit"}` starts a runner, `{"op": "cancel", "id"}`
stops it (its pod was deleted), and the emulator answers `{"id", "exit"}` when a runner exits.
One connection carries every runner, so thousands of runner containers cost no sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import aiohttp
from aiohttp import web

from sandbox.actions.runtime import JIT_CONFIG_ENV, RunnerRuntime, is_runner_container

log = logging.getLogger(__name__)

RUNTIME_PATH = "/_admin/runtime"


class RuntimeSocket:
    """The Actions emulator's side: runs the runners a `RemoteRuntime` asks for."""

    def __init__(self, runtime: RunnerRuntime) -> None:
        self._runtime = runtime

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=0)
        await ws.prepare(request)
        runners: dict[int, asyncio.Task[None]] = {}

        async def run(runner: int, jit: str) -> None:
            code = await self._runtime.run_runner(jit)
            runners.pop(runner, None)
            if not ws.closed:
                await ws.send_str(json.dumps({"id": runner, "exit": code}))

        try:
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    body = json.loads(message.data)
                    op, runner = body["op"], int(body["id"])
                except (ValueError, KeyError, TypeError):
                    log.warning("runtime socket: a malformed message, skipped")
                    continue
                if op == "run":
                    runners[runner] = asyncio.create_task(run(runner, str(body.get("jit", ""))))
                elif op == "cancel" and runner in runners:
                    runners.pop(runner).cancel()
        finally:
            for task in runners.values():
                task.cancel()
            await asyncio.gather(*runners.values(), return_exceptions=True)
        return ws


class RemoteRuntime:
    """The kubelet's side (the `ContainerRuntime` protocol): init containers exit 0 at once,
    containers other than `runner` run until their pod goes, and each `runner` container is a
    simulated runner in the Actions emulator at `url`."""

    def __init__(self, url: str) -> None:
        self._url = url.rstrip("/") + RUNTIME_PATH
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._next = 0

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(self._url, heartbeat=None, max_msg_size=0)
        self._reader = asyncio.create_task(self._read(self._ws))

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            body = json.loads(message.data)
            exit_code = self._exits.pop(int(body["id"]), None)
            if exit_code is not None and not exit_code.done():
                exit_code.set_result(int(body["exit"]))
        for waiting in self._exits.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError("the Actions emulator went away"))

    async def run(
        self, *, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]
    ) -> int:
        if not await is_runner_container(pod, container):
            return 0
        if self._ws is None:
            raise RuntimeError("RemoteRuntime.start() was not awaited")
        self._next += 1
        runner = self._next
        exit_code: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._exits[runner] = exit_code
        await self._ws.send_str(
            json.dumps({"op": "run", "id": runner, "jit": env.get(JIT_CONFIG_ENV, "")})
        )
        try:
            return await exit_code
        except asyncio.CancelledError:
            self._exits.pop(runner, None)
            if not self._ws.closed:
                await self._ws.send_str(json.dumps({"op": "cancel", "id": runner}))
            raise
