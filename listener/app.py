"""The listener's composition root: every dependency of one listener process, built in one place.

`run()` is the whole process after argument parsing: settings, logging, signals, then `serve()`.
`serve()` builds the telemetry (metrics, health, traces), the Actions client, the Kubernetes
object client and the `Listener` service, runs it until `stop` is set and returns the exit code.
Benchmarks and tests call `serve()` with their own settings and stop event.

Exit codes: 0 after SIGTERM/SIGINT (session deleted), 1 on an error retrying cannot fix
(credentials refused, scale set gone, a session conflict that outlived its wait, the
EphemeralRunnerSet patch refused for good), 2 on a configuration that cannot work, missing
Kubernetes permissions included (one line says what to fix).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from listener.config import ConfigError, ListenerSettings, load_settings
from listener.health import Progress, bound_port, start_server, telemetry_app
from listener.kube import MissingPermissions, RunnerSetClient
from listener.metrics import ListenerMetrics
from listener.service import Listener
from shared.actions.client import ActionsClient
from shared.actions.credentials import Credentials, GitHubApp, PersonalAccessToken
from shared.actions.errors import ActionsError, InvalidCredentials
from shared.actions.transport import RetryPolicy, SystemInfo
from shared.kube.errors import KubeError
from shared.kube.http import HttpApi, NeedsClientLibrary, load_connection
from shared.kube.objects import Objects
from shared.telemetry.logs import configure_logging, mask
from shared.telemetry.tracing import configure_tracing

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient


log = logging.getLogger("listener")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
_LEVELS = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR"}


class _Unusable(Exception):
    """The process cannot start as configured; the message is already logged."""


def credentials_of(settings: ListenerSettings) -> Credentials:
    """The PAT or App credentials; a key that does not parse is a configuration error."""
    token = settings.github_token.get_secret_value()
    private_key = settings.github_app_private_key.get_secret_value()
    mask(token, private_key)
    try:
        if token:
            return PersonalAccessToken(token)
        return GitHubApp(
            client_id=settings.github_app_id,
            installation_id=settings.github_app_installation_id,
            private_key=private_key,
        )
    except InvalidCredentials as exc:
        raise ConfigError(str(exc)) from None


def metrics_of(settings: ListenerSettings) -> ListenerMetrics:
    """ARC's `gha_*` metrics, labelled with the scale set and its configuration URL."""
    github = settings.github_config
    return ListenerMetrics(
        settings.metrics,
        scale_set_labels={
            "name": settings.ephemeral_runner_set_name,
            "namespace": settings.ephemeral_runner_set_namespace,
            "enterprise": github.enterprise,
            "organization": github.organization,
            "repository": github.repository,
        },
    )


def actions_client_of(settings: ListenerSettings, credentials: Credentials) -> ActionsClient:
    """The Actions service client, identified as ARC's listener subsystem."""
    return ActionsClient(
        config_url=settings.configure_url,
        credentials=credentials,
        system_info=SystemInfo(scale_set_id=settings.runner_scale_set_id, subsystem="ghalistener"),
        root_ca_pem=settings.server_root_ca or None,
        retry=RetryPolicy(
            wait_min=settings.retry_initial_seconds, wait_max=settings.retry_max_seconds
        ),
        long_poll_timeout=settings.long_poll_timeout_seconds,
    )


async def _kube_api() -> HttpApi | ApiClient:
    """The light client (`shared.kube.http`) for a configuration it can read, else
    kubernetes-asyncio's, imported only then (docs/listener.md#memory)."""
    try:
        try:
            connection = load_connection()
        except NeedsClientLibrary as why:
            log.info("%s: using kubernetes-asyncio's configuration loader", why)
            from shared.kube.client import load_configuration, new_api_client

            configuration = await load_configuration()
            log.info("Kubernetes API at %s", configuration.host)
            api: ApiClient = new_api_client(configuration)
            return api
    except PermissionError as exc:
        # In the image the listener runs as uid 10001, which a 0600 file of the host user is not.
        log.error(
            "cannot read the kubeconfig %s as uid %d (%s): make it readable by this uid",
            exc.filename,
            os.getuid(),
            exc.strerror,
        )
        raise _Unusable from None
    except Exception as exc:
        log.error(
            "cannot load the Kubernetes configuration (%s): set KUBECONFIG or run in a pod", exc
        )
        raise _Unusable from None
    log.info("Kubernetes API at %s", connection.host)
    return HttpApi(connection)


async def _telemetry_server(
    settings: ListenerSettings,
    *,
    progress: Progress,
    metrics: ListenerMetrics,
    on_listening: Callable[[int], None] | None,
) -> web.AppRunner | None:
    """The /healthz, /readyz and metrics server, or None when `metrics_addr` disables it."""
    if settings.metrics_listen is None:
        return None
    host, port = settings.metrics_listen
    app = telemetry_app(
        progress=progress, render_metrics=metrics.render, metrics_path=settings.metrics_endpoint
    )
    try:
        server = await start_server(app, host=host, port=port)
    except OSError as exc:
        log.error("cannot listen on metrics_addr %s: %s", settings.metrics_addr, exc)
        raise _Unusable from None
    bound = bound_port(server)
    log.info("serving /healthz, /readyz and %s on port %d", settings.metrics_endpoint, bound)
    if on_listening is not None:
        on_listening(bound)
    return server


async def serve(
    settings: ListenerSettings,
    credentials: Credentials,
    *,
    stop: asyncio.Event,
    on_listening: Callable[[int], None] | None = None,
) -> int:
    """Run the listener until `stop` is set; returns the exit code.

    `on_listening` receives the telemetry server's port once it is bound (port 0 picks one).
    """
    try:
        kube_api = await _kube_api()
    except _Unusable:
        return EXIT_CONFIG
    metrics = metrics_of(settings)
    progress = Progress(poll_timeout=settings.long_poll_timeout_seconds)
    tracing = configure_tracing("gha-listener")
    tracer = tracing.get_tracer("gha-listener")
    server = None
    try:
        try:
            server = await _telemetry_server(
                settings, progress=progress, metrics=metrics, on_listening=on_listening
            )
        except _Unusable:
            return EXIT_CONFIG
        async with actions_client_of(settings, credentials) as actions:
            listener = Listener(
                settings=settings,
                actions=actions,
                kube=RunnerSetClient(
                    Objects(kube_api, timeout=settings.kube_request_timeout_seconds),
                    namespace=settings.ephemeral_runner_set_namespace,
                    runner_set=settings.ephemeral_runner_set_name,
                    tracer=tracer,
                ),
                metrics=metrics,
                progress=progress,
                tracer=tracer,
                owner=socket.gethostname(),
                stop=stop,
            )
            try:
                await listener.run()
            except MissingPermissions as exc:
                log.error("cannot start: %s", exc)
                return EXIT_CONFIG
            except (ActionsError, KubeError) as exc:
                log.error("listener stopped: %s", exc)
                return EXIT_FAILED
            except Exception:
                log.exception("listener failed")
                return EXIT_FAILED
        log.info("stopped")
        return EXIT_OK
    finally:
        await kube_api.close()
        if server is not None:
            await server.cleanup()
        metrics.shutdown()
        # The OTLP exporter flushes synchronously; keep the loop free while it does.
        await asyncio.to_thread(tracing.shutdown)


def run() -> int:
    """The process: load the configuration, set up logging, serve until SIGTERM or SIGINT."""
    try:
        loaded = load_settings()
        credentials = credentials_of(loaded.settings)
    except ConfigError as exc:
        print(f"gha-listener: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    settings = loaded.settings
    configure_logging(
        fmt=settings.log_format,
        level=_LEVELS[settings.log_level],
        library_level=_LEVELS[settings.library_log_level],
    )
    if loaded.ignored_keys:
        log.warning("ignoring unknown config keys: %s", ", ".join(loaded.ignored_keys))
    return asyncio.run(_until_signalled(settings, credentials))


async def _until_signalled(settings: ListenerSettings, credentials: Credentials) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await serve(settings, credentials, stop=stop)
