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
from collections.abc import Callable, Collection, Sequence
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
from controller.deps import Deps
from controller.github.clients import ActionsClients
from controller.runtime import EventRecorder, Expectations, LeadershipLost, Manager
from controller.runtime.cache import Shape
from controller.runtime.health import health_routes, metrics_routes, serve
from controller.settings import (
    AutoscalingSettings,
    ConfigError,
    ControllerSettings,
    ListenerSettings,
    RunnerSettings,
    in_cluster_settings_from_environment,
    parse_settings,
    runner_settings_from_environment,
)
from shared import wire
from shared.api.names import LABEL_EPHEMERAL_RUNNER, LABEL_RUNNER_POD
from shared.kube.client import load_configuration, new_api_client, user_agent
from shared.kube.objects import POD
from shared.metricsauth import MetricsAuth
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


Setup = Callable[[Manager, Deps], object]
"""Every reconciler package's `setup(manager, deps)`: adds its controller to the manager."""

RUNNER_RECONCILERS: dict[str, Setup] = {
    "ephemeralrunnerset": ephemeralrunnerset.setup,
    "ephemeralrunner": ephemeralrunner.setup,
    "runnernamespace": runnernamespace.setup,
}
"""What every `gha-controller` runs, by controller name."""
IN_CLUSTER_RECONCILERS: dict[str, Setup] = {
    "autoscalingrunnerset": autoscalingrunnerset.setup,
    "autoscalinglistener": autoscalinglistener.setup,
}
"""What it runs in addition when the in-cluster mode is on (`Deps.autoscaling`)."""


def compose(
    manager: Manager,
    settings: RunnerSettings,
    *,
    autoscaling: AutoscalingSettings | None = None,
    listener: ListenerSettings | None = None,
    clients: ActionsClients | None = None,
    only: Collection[str] | None = None,
) -> Deps:
    """The dependencies built once, then each reconciler's `setup(manager, deps)`: the runner
    reconcilers, and the in-cluster ones with their settings. `only` names the controllers to
    add (all by default; the tests run some alone) and `clients` replaces the Actions clients
    (the tests' retry timings). The Actions clients and the tracer close with the manager.
    The process decodes JSON with pydantic-core's parser (shared/wire.py)."""
    wire.use_parser(wire.parse_with_pydantic_core)
    pool = clients or ActionsClients(
        objects=manager.objects,
        credentials_ttl=settings.credentials_ttl_seconds,
        allow_insecure=settings.allow_insecure_github,
    )
    manager.on_shutdown(pool.aclose)
    tracing = configure_tracing(COMPONENT)
    manager.tracer = tracing.get_tracer(COMPONENT)

    async def flush_spans() -> None:
        await asyncio.to_thread(tracing.shutdown)

    manager.on_shutdown(flush_spans)
    deps = Deps(
        settings=settings,
        clients=pool,
        events=EventRecorder(objects=manager.objects, component=COMPONENT),
        expectations=Expectations(),
        autoscaling=autoscaling,
        listener=listener,
        tracer=manager.tracer,
    )
    select_pods(manager, listener)
    setups = RUNNER_RECONCILERS
    if autoscaling is not None or listener is not None:
        setups = RUNNER_RECONCILERS | IN_CLUSTER_RECONCILERS
    for name, setup in setups.items():
        if only is None or name in only:
            setup(manager, deps)
    return deps


MANAGED_POD_SELECTORS = (LABEL_EPHEMERAL_RUNNER, LABEL_RUNNER_POD)
"""Label selectors of the pods the reconcilers read outside the listeners' namespace: runner
pods (this controller's and ARC's carry `actions-ephemeral-runner`) and the workflow pods a
runner's container hooks make (`runner-pod=<runner>`)."""


CONTAINER_STATUS_READ: Shape = {"name": None, "state": None, "lastState": None}
POD_STATUS_READ: Shape = {
    "phase": None,
    "reason": None,
    "message": None,
    "conditions": {
        "type": None,
        "status": None,
        "reason": None,
        "message": None,
        "lastTransitionTime": None,
    },
    "containerStatuses": CONTAINER_STATUS_READ,
    "initContainerStatuses": CONTAINER_STATUS_READ,
}
"""What the reconcilers read of a pod's status (the runner's and the listener's pod rules, the
runner's timeline, readiness): the cache keeps nothing else of it, neither the addresses, the
QoS class nor the containers' images, ids, mounts and resources
(`tests/controller/test_cache_reads.py` checks each reader against it)."""


def select_pods(manager: Manager, listener: ListenerSettings | None) -> None:
    """Cache only the pods the reconcilers manage: those `MANAGED_POD_SELECTORS` select, and
    every pod of the listeners' namespace, where the listener pods carry no label the user
    cannot leave out (`--exclude-label-propagation-prefix` drops the scale set's). Listeners
    reconciled in every namespace have pods anywhere: then every pod is cached
    (docs/controller-runtime.md#what-the-cache-keeps). Of their status, only `POD_STATUS_READ`
    is kept."""
    manager.narrow(POD, "status", POD_STATUS_READ)
    if listener is not None and not listener.controller_namespace:
        return
    whole = (listener.controller_namespace,) if listener is not None else ()
    manager.select(POD, MANAGED_POD_SELECTORS, whole=whole)


def install_reconcilers(manager: Manager) -> Deps:
    """Every reconciler `gha-controller` runs, on `manager`, with settings from the
    environment."""
    settings = runner_settings_from_environment()
    in_cluster = in_cluster_settings_from_environment()
    if not in_cluster.enabled:
        log.info(
            "AutoscalingRunnerSets are not reconciled: set CONTROLLER_MANAGER_POD_NAMESPACE and "
            "CONTROLLER_MANAGER_CONTAINER_IMAGE to run listeners in the cluster"
        )
        return compose(manager, settings)
    watched = manager.settings.namespaces
    if watched is not None and in_cluster.controller_namespace not in watched:
        raise ConfigError(
            f"--watch-namespace must include the controller namespace "
            f"{in_cluster.controller_namespace}, where listeners live"
        )
    return compose(
        manager,
        settings,
        autoscaling=in_cluster.autoscaling(settings),
        listener=in_cluster.listener(settings, metrics_auth=manager.settings.metrics_auth),
    )


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
        auth = MetricsAuth(api) if manager.settings.metrics_auth else None
        if auth is not None and (problem := await auth.missing_rights()):
            print(f"gha-controller: {problem}", file=sys.stderr)
            return EXIT_CONFIG
        metrics = metrics_routes(manager, auth=auth)
        try:
            if settings.metrics_port == settings.health_port:
                routes = health_routes(manager) + metrics
                servers.append(
                    await serve(routes, host=settings.bind_address, port=settings.health_port)
                )
            else:
                for routes, port in (
                    (health_routes(manager), settings.health_port),
                    (metrics, settings.metrics_port),
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
