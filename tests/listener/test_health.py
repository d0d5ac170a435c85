"""/healthz, /readyz and /metrics on one server, readiness judged on session and poll progress."""

from __future__ import annotations

import aiohttp
import pytest

from listener.health import Progress, TelemetryServer
from tests.ipv6 import ipv6_loopback


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("session_open", "polled_ago", "reason"),
    [
        (False, 0.0, "no message session"),
        (True, 0.0, None),
        (True, 100.0, None),
        (True, 121.0, "last poll finished 121s ago"),
    ],
)
def test_readiness(session_open: bool, polled_ago: float, reason: str | None) -> None:
    clock = Clock()
    progress = Progress(poll_timeout=60, clock=clock)
    progress.session_opened()
    clock.now += polled_ago
    if not session_open:
        progress.session_closed()
    assert progress.not_ready_reason() == reason


def test_a_failure_keeps_the_listener_unready_whatever_the_polls_say() -> None:
    progress = Progress(poll_timeout=60, clock=Clock())
    progress.session_opened()
    progress.failed("Kubernetes refused patch ephemeralrunnersets")
    progress.poll_finished()
    assert progress.not_ready_reason() == "Kubernetes refused patch ephemeralrunnersets"


async def test_server_answers_probes_and_metrics() -> None:
    clock = Clock()
    progress = Progress(poll_timeout=60, clock=clock)
    server = TelemetryServer(
        progress=progress, render_metrics=lambda: b"gha_x 1\n", metrics_path="/m"
    )
    base = f"http://127.0.0.1:{await server.start(host='127.0.0.1', port=0)}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            statuses = {}
            for path in ("/healthz", "/readyz", "/m"):
                async with http.get(base + path) as response:
                    statuses[path] = (response.status, await response.text())
            progress.session_opened()
            async with http.get(base + "/readyz") as response:
                ready = response.status
            async with http.get(base + "/metrics") as response:
                unknown = response.status
            async with http.post(base + "/healthz") as response:
                posted = (response.status, response.headers.get("Allow"))
            async with http.head(base + "/m") as response:
                head = (response.status, response.headers["Content-Type"], await response.read())
    finally:
        await server.close()
    assert statuses["/healthz"] == (200, "ok\n")
    assert statuses["/readyz"] == (503, "not ready: no message session\n")
    assert statuses["/m"] == (200, "gha_x 1\n")
    assert ready == 200
    assert unknown == 404
    assert posted == (405, "GET,HEAD")
    assert head == (200, "text/plain; version=1.0.0; charset=utf-8", b"")


async def test_closing_the_server_frees_its_port_with_a_connection_still_open() -> None:
    server = TelemetryServer(
        progress=Progress(poll_timeout=60), render_metrics=bytes, metrics_path="/m"
    )
    port = await server.start(host="127.0.0.1", port=0)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
        await server.close()
        with pytest.raises(aiohttp.ClientConnectionError):
            async with http.get(f"http://127.0.0.1:{port}/healthz"):
                pass


@pytest.mark.parametrize("host", ["", "::"])
async def test_an_unspecified_host_answers_probes_over_ipv4_and_ipv6(host: str) -> None:
    """metrics_addr ":8080" (and "[::]:8080"), as ARC's, on a single-stack IPv6 cluster: the
    kubelet probes the pod's IPv6 address. Before, ":8080" bound 0.0.0.0 only and the
    liveness probe restarted the listener every minute."""
    server = TelemetryServer(
        progress=Progress(poll_timeout=60), render_metrics=bytes, metrics_path="/m"
    )
    port = await server.start(host=host, port=0)
    loopbacks = ["127.0.0.1", "[::1]"] if ipv6_loopback() else ["127.0.0.1"]
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            for loopback in loopbacks:
                async with http.get(f"http://{loopback}:{port}/healthz") as response:
                    assert (loopback, response.status) == (loopback, 200)
    finally:
        await server.close()
