"""The controller's HTTP endpoints: /healthz, /readyz and /metrics on aiohttp."""

from __future__ import annotations

from aiohttp import web

from controller.runtime.manager import Manager
from shared.listen import listen_socket
from shared.metricsauth import MetricsAuth
from shared.telemetry.metrics import PROMETHEUS_CONTENT_TYPE


def health_routes(manager: Manager) -> list[web.RouteDef]:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        # Ready once every informer has listed: a leader then reconciles from a full cache, and a
        # follower can take over without a cold start.
        if manager.synced:
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    return [web.get("/healthz", healthz), web.get("/readyz", readyz)]


def metrics_routes(manager: Manager, *, auth: MetricsAuth | None = None) -> list[web.RouteDef]:
    """/metrics; with `auth`, only for a scraper the API server authenticates and RBAC allows."""

    async def metrics(request: web.Request) -> web.Response:
        if auth is not None:
            decision = await auth.decide(
                authorization=request.headers.get("Authorization"),
                method=request.method,
                path=request.path,
            )
            if not decision.allowed:
                return web.Response(status=decision.status, text=decision.message + "\n")
        body = manager.metrics.render()
        return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})

    return [web.get("/metrics", metrics)]


async def serve(routes: list[web.RouteDef], *, host: str, port: int) -> web.AppRunner:
    """Serve `routes` on `host`:`port`; an empty or unspecified host is every IPv4 and IPv6
    address, as Go's `:8080` (shared/listen.py). Raises OSError when the address is taken."""
    sock = listen_socket(host, port)
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner
