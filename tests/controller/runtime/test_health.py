"""The controller's probe and metrics servers listen as ARC's `:8080` does: IPv4 and IPv6."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from controller.runtime.health import serve
from tests.ipv6 import ipv6_loopback


async def ok(_: web.Request) -> web.Response:
    return web.Response(text="ok")


@pytest.mark.parametrize("host", ["", "0.0.0.0"])
async def test_an_unspecified_bind_address_answers_over_ipv4_and_ipv6(host: str) -> None:
    """Before, the default 0.0.0.0 left a single-stack IPv6 cluster's probes unanswered."""
    runner = await serve([web.get("/healthz", ok)], host=host, port=0)
    port = runner.addresses[0][1]
    loopbacks = ["127.0.0.1", "[::1]"] if ipv6_loopback() else ["127.0.0.1"]
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            for loopback in loopbacks:
                async with http.get(f"http://{loopback}:{port}/healthz") as response:
                    assert (loopback, response.status) == (loopback, 200)
    finally:
        await runner.cleanup()


async def test_an_explicit_bind_address_is_that_address_only() -> None:
    runner = await serve([web.get("/healthz", ok)], host="127.0.0.1", port=0)
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            with pytest.raises(aiohttp.ClientConnectionError):
                async with http.get(f"http://[::1]:{port}/healthz"):
                    pass
    finally:
        await runner.cleanup()
