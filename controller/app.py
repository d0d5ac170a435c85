"""The composition root of `gha-controller`: settings in, one manager, the dependencies built
once, each reconciler's `setup(manager, deps)` called in plain sight, then run.

`gha-controller migrate-from-arc` runs the one-off migration of controller/migrate.py instead.

Exit codes: 0 after SIGTERM/SIGINT (in-flight reconciles drained, lease released), 1 when the
lease was lost (the process must restart to rejoin), 2 on a configuration that cannot work (one
line on stderr says what to fix).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from controller import (
    autoscalinglistener,
    autoscalingrunnerset,
    ephemeralrunner,
    ephemeralrunnerset,
    explain,
    migrate,
    runnernamespace,
)
from controller.autoscalinglistener.objects import StandbyTimings
from controller.autoscalinglistener.reconciler import ListenerSettings
from controller.autoscalingrunnerset.reconciler import AutoscalingSettings
from controller.github.clients import ActionsClients
from controller.runners.deps import RunnerDeps
from controller.runners.settings import RunnerSettings
from controller.runtime import EventRecorder, Expectations, LeadershipLost, Manager
from controller.runtime.health import health_routes, metrics_routes, serve
from controller.settings import (
    ConfigError,
    ControllerSettings,
    in_cluster_settings_from_environment,
    parse_settings,
    runner_settings_from_environment,
)
from shared.kube.client import load_configuration, new_api_client, user_agent
from shared.telemetry.logs import configure_logging, redact
from shared.telemetry.tracing import configure_tracing

log = logging.getLogger("controller")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
COMPONENT = "gha-controller"
"""The `source.component` of the Events the controller records, and the product of its
User-Agent: the field manager of its writes (docs/listener.md#kubernetes-requests)."""

MIGRATE_FROM_ARC = "migrate-from-arc"
"""The subcommand that hands a cluster over from ARC (controller/migrate.py)."""

Install = Callable[[Manager], object]
"""Adds controllers to a manager; may raise ConfigError."""


def runner_deps(
    manager: Manager, settings: RunnerSettings, *, clients: ActionsClients | None = None
) -> RunnerDeps:
    """What both runner reconcilers share, built once; the Actions clients close with the
    manager."""
    pool = clients or ActionsClients(
        objects=manager.objects, credentials_ttl=settings.credentials_ttl_seconds
    )
    manager.on_shutdown(pool.aclose)
    tracing = configure_tracing(COMPONENT)

    async def flush_spans() -> None:
        await asyncio.to_thread(tracing.shutdown)

    manager.on_shutdown(flush_spans)
    return RunnerDeps(
        settings=settings,
        clients=pool,
        events=EventRecorder(objects=manager.objects, component=COMPONENT),
        expectations=Expectations(),
        tracer=tracing.get_tracer(COMPONENT),
    )


def install_reconcilers(manager: Manager) -> RunnerDeps:
    """Every reconciler `gha-controller` runs, on `manager`, with settings from the
    environment."""
    deps = runner_deps(manager, runner_settings_from_environment())
    ephemeralrunnerset.setup(manager, deps)
    ephemeralrunner.setup(manager, deps)
    runnernamespace.setup(manager, events=deps.events)
    in_cluster = in_cluster_settings_from_environment()
    if not in_cluster.enabled:
        log.info(
            "AutoscalingRunnerSets are not reconciled: set CONTROLLER_MANAGER_POD_NAMESPACE and "
            "CONTROLLER_MANAGER_CONTAINER_IMAGE to run listeners in the cluster"
        )
        return deps
    watched = manager.settings.namespaces
    if watched is not None and in_cluster.controller_namespace not in watched:
        raise ConfigError(
            f"--watch-namespace must include the controller namespace "
            f"{in_cluster.controller_namespace}, where listeners live"
        )
    autoscalingrunnerset.setup(
        manager,
        clients=deps.clients,
        events=deps.events,
        expectations=deps.expectations,
        settings=AutoscalingSettings(
            controller_namespace=in_cluster.controller_namespace,
            listener_image=in_cluster.listener_image,
            image_pull_secrets=tuple(in_cluster.listener_image_pull_secrets),
            excluded_label_prefixes=tuple(deps.settings.exclude_label_propagation_prefixes),
        ),
    )
    autoscalinglistener.setup(
        manager,
        events=deps.events,
        settings=ListenerSettings(
            metrics_addr=""
            if in_cluster.listener_metrics_addr == "0"
            else in_cluster.listener_metrics_addr,
            metrics_endpoint=in_cluster.listener_metrics_endpoint,
            log_level=in_cluster.listener_log_level,
            log_format=in_cluster.listener_log_format,
            entrypoint=in_cluster.listener_entrypoint,
            controller_namespace=in_cluster.controller_namespace,
            standby=StandbyTimings(
                lease_duration_seconds=in_cluster.listener_standby_lease_duration_seconds,
                renew_deadline_seconds=in_cluster.listener_standby_renew_deadline_seconds,
                retry_period_seconds=in_cluster.listener_standby_retry_period_seconds,
            ),
        ),
    )
    return deps


async def run(settings: ControllerSettings, *, install: Install = install_reconcilers) -> int:
    try:
        kube_config = await load_configuration(settings.kubeconfig, context=settings.context)
    except Exception as exc:
        # The loader's reason names the file or setting at fault; one line, redacted.
        reason = redact(" ".join(str(exc).split()))
        print(
            f"gha-controller: cannot load the Kubernetes configuration ({type(exc).__name__}"
            f"{': ' + reason if reason else ''}): set --kubeconfig or KUBECONFIG, or run in a pod",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    server = urlsplit(kube_config.host)
    if server.scheme not in {"http", "https"} or not server.hostname:
        print(
            f"gha-controller: the Kubernetes API server {kube_config.host!r} in the kubeconfig "
            "is not an http(s) URL: fix the cluster's server",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    async with new_api_client(kube_config, user_agent=user_agent(COMPONENT)) as api:
        manager = Manager(api=api, settings=settings.runtime())
        try:
            install(manager)
        except ConfigError as exc:
            print(f"gha-controller: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, manager.stop)
        servers = []
        try:
            if settings.metrics_port == settings.health_port:
                routes = health_routes(manager) + metrics_routes(manager)
                servers.append(
                    await serve(routes, host=settings.bind_address, port=settings.health_port)
                )
            else:
                for routes, port in (
                    (health_routes(manager), settings.health_port),
                    (metrics_routes(manager), settings.metrics_port),
                ):
                    servers.append(await serve(routes, host=settings.bind_address, port=port))
            log.info(
                "controller started",
                extra={
                    "identity": settings.identity,
                    "controllers": [c.name for c in manager.controllers],
                    "leader_elect": settings.leader_elect,
                },
            )
            await manager.run()
        except LeadershipLost as exc:
            log.error("stopping: %s", exc)
            return EXIT_FAILED
        except OSError as exc:
            print(f"gha-controller: cannot serve HTTP: {exc.strerror}", file=sys.stderr)
            return EXIT_CONFIG
        finally:
            for server in servers:
                await server.cleanup()
            manager.metrics.metrics.shutdown()
    log.info("controller stopped")
    return EXIT_OK


def main(argv: Sequence[str] | None = None, *, install: Install = install_reconcilers) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == [MIGRATE_FROM_ARC]:
        # A migration stopped half-way is not a success: SIGTERM kills it as by default.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return migrate.main(args[1:])
    if args[:1] == [explain.EXPLAIN]:
        return explain.main(args[1:])
    try:
        settings = parse_settings(args, dict(os.environ))
    except ConfigError as exc:
        print(f"gha-controller: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(fmt=settings.log_format, level=settings.log_level, json_shape="zap")
    return asyncio.run(run(settings, install=install))
