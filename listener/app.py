"""The listener's composition root: every dependency of one listener process, built in one place.

`run()` is the whole process after argument parsing: settings, logging, signals, then
`serve_many()` over the configured scale sets (one for a config file, each file's for a
directory). `serve_many()` builds the telemetry (metrics, health, traces), the Kubernetes object
client and, per set, the Actions client and the `Listener` service, runs them until `stop` is set
and returns the exit code; `serve()` is it for one set. Benchmarks and tests call both with their
own settings and stop event.

Exit codes: 0 after SIGTERM/SIGINT (sessions deleted), 1 on an error retrying cannot fix
(credentials refused, scale set gone, a session conflict that outlived its wait, the
EphemeralRunnerSet patch refused for good), 2 on a configuration that cannot work, missing
Kubernetes permissions included (one line says what to fix). One set failing so ends the process
whatever the number of sets (docs/listener.md#when-a-scale-set-fails).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from listener.config import ConfigError, ListenerSettings, load_all_settings
from listener.health import Progress, TelemetryServer
from listener.kube import MissingPermissions, RunnerSetClient
from listener.metrics import ListenerMetrics
from listener.retry import Backoff, Stopping, retry_transient
from listener.service import Listener
from listener.standby import SessionHandoff, elector_of, stand_by_and_lead
from shared.actions.client import ActionsClient
from shared.actions.credentials import Credentials, GitHubApp, PersonalAccessToken
from shared.actions.errors import ActionsError, InvalidCredentials, ScaleSetNotFound
from shared.actions.scalesets import runner_group_id
from shared.actions.transport import RetryPolicy, SystemInfo
from shared.kube.errors import KubeError
from shared.kube.http import HttpApi, NeedsClientLibrary, load_connection, user_agent
from shared.kube.objects import Objects
from shared.metricsauth import MetricsAuth
from shared.telemetry.logs import configure_logging, mask
from shared.telemetry.tracing import configure_tracing

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient


log = logging.getLogger("listener")

PROGRAM = "gha-listener"
"""The product of the listener's User-Agent: the field manager of its writes
(docs/listener.md#kubernetes-requests)."""

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
            api: ApiClient = new_api_client(configuration, user_agent=user_agent(PROGRAM))
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
    return HttpApi(connection, user_agent=user_agent(PROGRAM))


async def _run_listener(
    settings: ListenerSettings,
    actions: ActionsClient,
    kube_api: HttpApi | ApiClient,
    metrics: ListenerMetrics,
    progress: Progress,
    tracer: Tracer,
    stop: asyncio.Event,
) -> None:
    """Run the Listener of one scale set on the process's shared Kubernetes client until `stop`
    is set; with `standby_lease_name`, only while this replica holds the Lease."""
    objects = Objects(kube_api, timeout=settings.kube_request_timeout_seconds)
    kube = RunnerSetClient(
        objects,
        namespace=settings.ephemeral_runner_set_namespace,
        runner_set=settings.ephemeral_runner_set_name,
        tracer=tracer,
        lease=settings.standby_lease_name,
    )

    def listener(until: asyncio.Event, handoff: SessionHandoff | None = None) -> Listener:
        return Listener(
            settings=settings,
            actions=actions,
            kube=kube,
            metrics=metrics,
            progress=progress,
            tracer=tracer,
            owner=socket.gethostname(),
            stop=until,
            handoff=handoff,
        )

    if not settings.standby_lease_name:
        await listener(stop).run()
        return
    try:
        # Both replicas check their permissions at start, not only the one that leads.
        await retry_transient(
            kube.check_access,
            what="Kubernetes permission review",
            backoff=Backoff(
                initial=settings.retry_initial_seconds, maximum=settings.retry_max_seconds
            ),
            stop=stop,
        )
    except Stopping:
        return

    async def lead(term: asyncio.Event, handoff: SessionHandoff) -> None:
        await listener(term, handoff).run()

    await stand_by_and_lead(elector_of(settings, objects), lead=lead, progress=progress, stop=stop)


async def _telemetry_server(
    settings: ListenerSettings,
    *,
    progress: Progress,
    render: Callable[[], bytes],
    on_listening: Callable[[int], None] | None,
    kube_api: HttpApi | ApiClient,
) -> TelemetryServer | None:
    """The /healthz, /readyz and metrics server, or None when `metrics_addr` disables it; with
    `metrics_auth`, the metrics for authorized scrapers only, reviewed by `kube_api`'s
    identity."""
    if settings.metrics_listen is None:
        return None
    auth = None
    if settings.metrics_auth:
        auth = MetricsAuth(kube_api)
        if problem := await auth.missing_rights():
            log.error("cannot start: %s", problem)
            raise _Unusable
    host, port = settings.metrics_listen
    server = TelemetryServer(
        progress=progress,
        render_metrics=render,
        metrics_path=settings.metrics_endpoint,
        auth=auth,
    )
    try:
        bound = await server.start(host=host, port=port)
    except OSError as exc:
        log.error("cannot listen on metrics_addr %s: %s", settings.metrics_addr, exc)
        raise _Unusable from None
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
    """Run the listener of one scale set until `stop` is set; returns the exit code.

    `serve_many` with one set: the same composition and the same failure rule.
    `on_listening` receives the telemetry server's port once it is bound (port 0 picks one).
    """
    return await serve_many([ScaleSet(settings, credentials)], stop=stop, on_listening=on_listening)


def run(*, delete_scale_set: bool = False) -> int:
    """The process: load the configuration, set up logging, serve until SIGTERM or SIGINT; with
    `delete_scale_set`, delete the configured scale sets from GitHub instead."""
    try:
        loaded = load_all_settings()
        sets = [ScaleSet(config.settings, credentials_of(config.settings)) for config in loaded]
    except ConfigError as exc:
        print(f"gha-listener: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    settings = sets[0].settings
    # To stdout, as ARC's listener logs: a pipeline that reads stderr as errors (GKE's, without
    # a severity field) keeps its saved queries. A configuration it cannot start with is said on
    # stderr above, before there is a log, as Go's log.Fatal says it.
    configure_logging(
        fmt=settings.log_format,
        level=_LEVELS[settings.log_level],
        library_level=_LEVELS[settings.library_log_level],
        stream=sys.stdout,
    )
    for config in loaded:
        if config.ignored_keys:
            log.warning("ignoring unknown config keys: %s", ", ".join(config.ignored_keys))
    if delete_scale_set:
        return asyncio.run(_delete_scale_sets(sets))
    return asyncio.run(_until_signalled(sets))


async def _delete_scale_sets(sets: list[ScaleSet]) -> int:
    """Delete each configured scale set from GitHub, one line each: what a listener registered
    stays there after its EphemeralRunnerSet is gone (docs/listener.md#taking-a-listener-down).
    Exit 0 when none is left (one already gone counts), 1 when GitHub refused or failed."""
    code = EXIT_OK
    for scale_set in sets:
        settings = scale_set.settings
        async with actions_client_of(settings, scale_set.credentials) as actions:
            try:
                scale_set_id = settings.runner_scale_set_id
                if not scale_set_id:
                    group = await runner_group_id(actions, settings.runner_group)
                    found = await actions.get_runner_scale_set(
                        runner_group_id=group, name=settings.runner_scale_set_name
                    )
                    if found is None:
                        log.info(
                            "no scale set named %s in runner group %s: nothing to delete",
                            settings.runner_scale_set_name,
                            settings.runner_group or "Default",
                        )
                        continue
                    scale_set_id = found.id
                await actions.delete_runner_scale_set(scale_set_id)
            except ScaleSetNotFound:
                log.info("scale set %d is gone already: nothing to delete", scale_set_id)
                continue
            except ActionsError as exc:
                log.error("cannot delete scale set %s: %s", settings.runner_scale_set_name, exc)
                code = EXIT_FAILED
                continue
        log.info("deleted scale set %d (%s)", scale_set_id, settings.runner_scale_set_name)
    return code


async def _until_signalled(sets: list[ScaleSet]) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await serve_many(sets, stop=stop)


@dataclass(frozen=True)
class ScaleSet:
    """One scale set of a process: its settings and GitHub credentials."""

    settings: ListenerSettings
    credentials: Credentials

    @property
    def name(self) -> str:
        return (
            f"{self.settings.ephemeral_runner_set_namespace}/"
            f"{self.settings.ephemeral_runner_set_name}"
        )


_CURRENT_SET: contextvars.ContextVar[str] = contextvars.ContextVar("scale_set", default="")


class _ScaleSetField(logging.Filter):
    """Adds `scale_set` (namespace/name) to each record logged on behalf of one set, so the
    interleaved lines of many sets can be told apart (a field of the JSON format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = _CURRENT_SET.get()
        if name:
            record.scale_set = name
        return True


_SCALE_SET_FIELD = _ScaleSetField()
"""One instance, so a process (or a test session) serving again adds no second filter."""


class _AllSets(Progress):
    """Readiness of a process: ready when every set is; with many sets, the reason names the
    sets that are not."""

    def __init__(self, sets: dict[str, Progress]) -> None:
        super().__init__(poll_timeout=0)
        self.sets = sets

    def not_ready_reason(self) -> str | None:
        if len(self.sets) == 1:
            [only] = self.sets.values()
            return only.not_ready_reason()
        reasons = [
            f"{name}: {reason}"
            for name, progress in self.sets.items()
            if (reason := progress.not_ready_reason()) is not None
        ]
        return "; ".join(reasons) or None


class _MergedMetrics:
    """The metric families of every set's registry as one: the same family (with the sets'
    labels telling the series apart) once, as Prometheus requires."""

    def __init__(self, metrics: list[ListenerMetrics]) -> None:
        self.registries = [m.metrics.registry for m in metrics]

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for registry in self.registries:
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = Metric(family.name, family.documentation, family.type, family.unit)
                    families[family.name] = merged
                merged.samples.extend(family.samples)
        yield from families.values()


async def serve_many(
    sets: list[ScaleSet],
    *,
    stop: asyncio.Event,
    on_listening: Callable[[int], None] | None = None,
) -> int:
    """Serve every scale set in one process until `stop` is set; returns the exit code.

    Each set has its own Actions client, message session, scaler, metrics labels and readiness;
    they share the Kubernetes client, the tracer and the telemetry server (the first set's
    `metrics_addr`: the configs agree on it). One set is this with one entry.

    The failure rule (docs/listener.md#when-a-scale-set-fails), the same for one set and many:
    a set that fails for good (refused credentials, a missing permission, the set patch refused)
    marks the process not ready with its reason, every other set stops and deletes its session,
    and the process exits with that set's code (1, or 2 for missing permissions). SIGTERM deletes
    every set's session and exits 0.
    """
    try:
        kube_api = await _kube_api()
    except _Unusable:
        return EXIT_CONFIG
    for handler in logging.getLogger().handlers:
        handler.addFilter(_SCALE_SET_FIELD)
    first = sets[0].settings
    metrics = {scale_set.name: metrics_of(scale_set.settings) for scale_set in sets}
    progress = {
        scale_set.name: Progress(poll_timeout=scale_set.settings.long_poll_timeout_seconds)
        for scale_set in sets
    }
    merged = CollectorRegistry(auto_describe=False)
    merged.register(_MergedMetrics(list(metrics.values())))
    tracing = configure_tracing("gha-listener")
    tracer = tracing.get_tracer("gha-listener")
    server = None
    ending = _Ending(stop)
    try:
        try:
            server = await _telemetry_server(
                first,
                progress=_AllSets(progress),
                render=lambda: generate_latest(merged),
                on_listening=on_listening,
                kube_api=kube_api,
            )
        except _Unusable:
            return EXIT_CONFIG
        if len(sets) > 1:
            log.info("serving %d scale sets: %s", len(sets), ", ".join(metrics))
        following = asyncio.create_task(ending.follow_stop())
        try:
            async with asyncio.TaskGroup() as sets_running:
                for scale_set in sets:
                    sets_running.create_task(
                        _serve_set(
                            scale_set,
                            kube_api=kube_api,
                            metrics=metrics[scale_set.name],
                            progress=progress[scale_set.name],
                            tracer=tracer,
                            ending=ending,
                        )
                    )
        finally:
            following.cancel()
        if ending.code == EXIT_OK:
            log.info("stopped")
        return ending.code
    finally:
        await kube_api.close()
        if server is not None:
            await server.close()
        for set_metrics in metrics.values():
            set_metrics.shutdown()
        # The OTLP exporter flushes synchronously; keep the loop free while it does.
        await asyncio.to_thread(tracing.shutdown)


class _Ending:
    """When the sets of a process stop, and with which exit code: on `stop` (SIGTERM) with 0,
    or on the first set that fails for good with its code."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.event = asyncio.Event()
        """Set when every set should stop: `stop` was set or a set failed."""
        self.code = EXIT_OK

    def failed(self, code: int) -> None:
        if not self.event.is_set():
            self.code = code
        self.event.set()

    async def follow_stop(self) -> None:
        stopped = asyncio.ensure_future(self.stop.wait())
        ended = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait((stopped, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            ended.cancel()
        self.event.set()


async def _serve_set(
    scale_set: ScaleSet,
    *,
    kube_api: HttpApi | ApiClient,
    metrics: ListenerMetrics,
    progress: Progress,
    tracer: Tracer,
    ending: _Ending,
) -> None:
    """One set of `serve_many`, until `ending` is set; a failure ends every set."""
    _CURRENT_SET.set(scale_set.name)
    settings = scale_set.settings
    try:
        async with actions_client_of(settings, scale_set.credentials) as actions:
            await _run_listener(
                settings, actions, kube_api, metrics, progress, tracer, ending.event
            )
        return
    except MissingPermissions as exc:
        reason, code = str(exc), EXIT_CONFIG
        log.error("cannot start: %s", reason)
    except (ActionsError, KubeError) as exc:
        reason, code = str(exc), EXIT_FAILED
        log.error("listener stopped: %s", reason)
    except Exception as exc:
        reason, code = type(exc).__name__, EXIT_FAILED
        log.exception("listener failed")
    progress.failed(reason)
    ending.failed(code)
