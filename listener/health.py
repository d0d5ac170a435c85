"""One HTTP server for the probes and the metrics.

`/healthz` answers while the process runs: transient failures are retried in process, so a
restart would not help. `/readyz` answers 200 only while a message session is open and a long
poll finished recently, which catches the silent stalls ARC's listener was known for (a listener
that is "up" but receives nothing), and goes non-200 for good once the loop met an error it
cannot recover from, before the process exits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp.web_request import BaseRequest
from aiohttp.web_response import Response
from aiohttp.web_server import Server
from prometheus_client import CONTENT_TYPE_LATEST

from shared.listen import listen_socket
from shared.metricsauth import MetricsAuth


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


class TelemetryServer:
    """`/healthz`, `/readyz` and the metrics path on aiohttp's low-level server.

    `aiohttp.web`'s Application, router and runners are not imported: for three fixed GET paths
    they cost 1.9 MB of the listener's resident memory (docs/listener.md#memory); the request
    parsing and the responses are still aiohttp's.
    """

    def __init__(
        self,
        *,
        progress: Progress,
        render_metrics: Callable[[], bytes],
        metrics_path: str,
        auth: MetricsAuth | None = None,
    ) -> None:
        """With `auth`, the metrics path answers only scrapers the API server authenticates and
        RBAC allows (docs/security.md#metrics); the probes answer anyone."""
        self._routes: dict[str, Callable[[], Response]] = {
            "/healthz": lambda: Response(text="ok\n"),
            "/readyz": lambda: _readiness(progress),
            metrics_path: lambda: Response(
                body=render_metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST}
            ),
        }
        self._metrics_path = metrics_path
        self._auth = auth
        self._server: Server | None = None
        self._listening: asyncio.Server | None = None

    async def _handle(self, request: BaseRequest) -> Response:
        route = self._routes.get(request.path)
        if route is None:
            return Response(status=404, text="404: Not Found")
        if request.method not in ALLOWED:
            return Response(
                status=405, text="405: Method Not Allowed", headers={"Allow": ",".join(ALLOWED)}
            )
        if self._auth is not None and request.path == self._metrics_path:
            decision = await self._auth.decide(
                authorization=request.headers.get("Authorization"),
                method=request.method,
                path=request.path,
            )
            if not decision.allowed:
                return Response(status=decision.status, text=decision.message + "\n")
        return route()

    async def start(self, *, host: str, port: int) -> int:
        """Listen on `host`:`port` (0 picks a free port; an empty or unspecified host is every
        IPv4 and IPv6 address, as in Go); returns the port bound."""
        self._server = Server(self._handle, access_log=None)
        self._listening = await asyncio.get_running_loop().create_server(
            self._server, sock=listen_socket(host, port)
        )
        return int(self._listening.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening, then finish or close the open connections."""
        if self._listening is not None:
            self._listening.close()
        if self._server is not None:
            await self._server.shutdown(timeout=1.0)
        if self._listening is not None:
            await self._listening.wait_closed()


ALLOWED = ("GET", "HEAD")


def _readiness(progress: Progress) -> Response:
    reason = progress.not_ready_reason()
    if reason is None:
        return Response(text="ok\n")
    return Response(status=503, text=f"not ready: {reason}\n")
