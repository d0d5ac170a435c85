"""One aiohttp server for the probes and the metrics.

`/healthz` answers while the process runs: transient failures are retried in process, so a
restart would not help. `/readyz` answers 200 only while a message session is open and a long
poll finished recently, which catches the silent stalls ARC's listener was known for (a listener
that is "up" but receives nothing), and goes non-200 for good once the loop met an error it
cannot recover from, before the process exits.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST


class Progress:
    """What readiness is judged on, written by the message loop."""

    def __init__(self, *, poll_timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.poll_timeout = poll_timeout
        self._clock = clock
        self.session_open = False
        self._last_poll: float | None = None
        self._failure: str | None = None
        self.standby = False
        """Waiting for the standby Lease: ready, waiting is its job (docs/listener.md#standby)."""

    def poll_finished(self) -> None:
        self._last_poll = self._clock()

    def standing_by(self) -> None:
        self.standby = True

    def session_opened(self) -> None:
        self.standby = False
        self.session_open = True
        self._last_poll = self._clock()

    def session_closed(self) -> None:
        self.session_open = False

    def failed(self, reason: str) -> None:
        """The listener cannot do its job any more and is about to exit."""
        self._failure = reason

    def not_ready_reason(self) -> str | None:
        if self._failure is not None:
            return self._failure
        if self.standby:
            return None
        if not self.session_open:
            return "no message session"
        if self._last_poll is None:
            return "no poll finished yet"
        age = self._clock() - self._last_poll
        if age > 2 * self.poll_timeout:
            return f"last poll finished {age:.0f}s ago"
        return None


def telemetry_app(
    *, progress: Progress, render_metrics: Callable[[], bytes], metrics_path: str
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        reason = progress.not_ready_reason()
        if reason is None:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {reason}\n")

    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=render_metrics())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get(metrics_path, metrics)
    return app


async def start_server(app: web.Application, *, host: str, port: int) -> web.AppRunner:
    """Serve `app`; the caller cleans up the returned runner. Port 0 picks a free port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the telemetry server is not listening")
