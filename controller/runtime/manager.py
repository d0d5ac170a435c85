"""The manager: shared informers, the controllers, and leader election around them.

Informers run in every replica, so a follower's cache is warm when it takes over. Controllers
run only in the leader: on winning the lease, each controller's handlers are registered (which
replays an add for every cached object, so nothing that happened before is missed) and its workers
start. `stop()` drains: queues stop handing out keys, in-flight reconciles finish (up to
`drain_timeout`), then the lease is released so a follower takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kubernetes_asyncio import client
from opentelemetry import trace
from opentelemetry.trace import Tracer

from controller.runtime.cache import Informer, Shape, Store, WatchSettings
from controller.runtime.controller import Controller, handlers, worker
from controller.runtime.echoes import record_write
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.queue import Backoff, WorkQueue
from controller.runtime.reconcile import Request
from shared.clock import Clock, MonotonicClock
from shared.kube.lease import LeaderElector, LeaseSettings
from shared.kube.objects import Kind, Objects

log = logging.getLogger(__name__)


class LeadershipLost(Exception):
    """The lease could not be renewed in time; the process should exit and restart."""


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    namespaces: frozenset[str] | None = None
    """Namespaces to watch; None watches all of them."""
    workers: int = 4
    """Default concurrent reconciles per controller (ARC hard-wires 1 for most, its bottleneck)."""
    urgent_workers: int = 12
    """Default workers kept for the urgent lane of a controller that has one
    (docs/controller-runtime.md#the-urgent-lane)."""
    backoff: Backoff = field(default_factory=Backoff)
    watch: WatchSettings = field(default_factory=WatchSettings)
    leader_election: LeaseSettings | None = None
    """None runs the controllers without electing a leader (a single replica)."""
    identity: str = field(default_factory=lambda: f"gha-controller-{uuid.uuid4().hex[:12]}")
    drain_timeout: float = 30.0
    """How long SIGTERM waits for in-flight reconciles before cancelling them."""
    request_timeout: float = 30.0
    metrics_auth: bool = False
    """Serve /metrics only to scrapers the API server authenticates and RBAC allows
    (`shared.metricsauth`); the listeners this process runs do the same."""


class Manager:
    def __init__(
        self,
        *,
        api: client.ApiClient,
        settings: RuntimeSettings | None = None,
        metrics: RuntimeMetrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings or RuntimeSettings()
        self.metrics = metrics or RuntimeMetrics()
        self.objects = Objects(
            api,
            timeout=self.settings.request_timeout,
            observer=self.metrics.rest_client(urlsplit(api.configuration.host).netloc),
            on_write=record_write,
        )
        self._clock = clock or MonotonicClock()
        self.tracer: Tracer = trace.get_tracer(__name__)
        """The tracer of the passes' spans (docs/controller-runtime.md#traces): the process's
        global provider's until the composition root sets the process's own."""
        self._informers: dict[Kind, Informer] = {}
        self._selections: dict[Kind, tuple[Collection[str], Collection[str]]] = {}
        self._narrowed: dict[Kind, list[tuple[str, Shape]]] = {}
        self._controllers: list[Controller] = []
        self._stopping = asyncio.Event()
        self._on_shutdown: list[Callable[[], Awaitable[None]]] = []
        self.elector = (
            LeaderElector(
                objects=self.objects,
                identity=self.settings.identity,
                settings=self.settings.leader_election,
                clock=self._clock,
            )
            if self.settings.leader_election is not None
            else None
        )
        self.leading = asyncio.Event()
        self.metrics.leader_gauge(self._leader_status)

    def _leader_status(self) -> Iterable[tuple[float, dict[str, str]]]:
        if self.settings.leader_election is None:
            return []
        name = self.settings.leader_election.name
        return [(1.0 if self.leading.is_set() else 0.0, {"name": name})]

    @property
    def controllers(self) -> tuple[Controller, ...]:
        return tuple(self._controllers)

    def informer(self, kind: Kind) -> Informer:
        """The shared informer of a kind, created on first use (before `run`)."""
        if kind not in self._informers:
            self._informers[kind] = Informer(
                objects=self.objects,
                kind=kind,
                namespaces=self.settings.namespaces,
                settings=self.settings.watch,
                clock=self._clock,
            )
            if kind in self._selections:
                selectors, whole = self._selections[kind]
                self._informers[kind].select(selectors, whole=whole)
            for field, shape in self._narrowed.get(kind, ()):
                self._informers[kind].narrow(field, shape)
            self.metrics.observe_informer(self._informers[kind])
        return self._informers[kind]

    def select(
        self, kind: Kind, selectors: Collection[str], *, whole: Collection[str] = ()
    ) -> None:
        """Before `run`: the kind's informer, whenever a reader asks for it, keeps only the
        objects matching one of the label `selectors` and every object of the namespaces in
        `whole` (`Informer.select`)."""
        self._selections[kind] = (selectors, whole)
        if kind in self._informers:
            self._informers[kind].select(selectors, whole=whole)

    def narrow(self, kind: Kind, field: str, shape: Shape) -> None:
        """Before `run`: the kind's informer keeps only `shape` of the top-level `field`
        (`Informer.narrow`)."""
        self._narrowed.setdefault(kind, []).append((field, shape))
        if kind in self._informers:
            self._informers[kind].narrow(field, shape)

    def cache(self, kind: Kind, *, reads: Collection[str] | None = None) -> Store:
        """The read path of reconcilers: the store of a kind's shared informer. `reads` names
        the top-level fields beside `metadata` this reader reads (`Informer.reads`); without
        it the store keeps whole objects."""
        informer = self.informer(kind)
        informer.reads(reads)
        return informer.store

    def add(self, ctrl: Controller) -> None:
        """Register a controller; its kinds' informers are created now."""
        ctrl.queue = WorkQueue[Request](ctrl.name, backoff=ctrl.backoff or self.settings.backoff)
        self.metrics.observe_controller(ctrl.name)
        self.metrics.observe_queue(ctrl.queue)
        for kind, _ in handlers(ctrl, self.metrics):
            self.informer(kind)
        self._controllers.append(ctrl)

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self._informers.values())

    async def wait_synced(self) -> None:
        for inf in self._informers.values():
            await inf.synced.wait()

    def on_shutdown(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Await `callback` when `run` ends, after the drain, in registration order."""
        self._on_shutdown.append(callback)

    def stop(self) -> None:
        """Ask `run` to drain and return."""
        self._stopping.set()

    async def run(self) -> None:
        """Run until `stop()`; raises LeadershipLost if the lease slips away."""
        informers = [
            asyncio.create_task(inf.run(), name=f"informer-{kind.plural}")
            for kind, inf in self._informers.items()
        ]
        lead = asyncio.create_task(self._lead(), name="lead")
        try:
            done, _ = await asyncio.wait([lead, *informers], return_when=asyncio.FIRST_COMPLETED)
            if lead not in done:
                # An informer only ends by an error it could not retry: stop rather than
                # reconcile from a cache that no longer follows the server.
                await self._cancel([lead])
                for task in done:
                    task.result()
            lead.result()
        finally:
            await self._cancel([lead, *informers])
            for callback in self._on_shutdown:
                try:
                    await callback()
                except Exception:
                    log.exception("shutdown callback failed")

    async def _until_stopped(self, coro: asyncio.Future[None]) -> bool:
        """Wait for `coro` or for stop(); whether `coro` finished first."""
        stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        try:
            futures: set[asyncio.Future[Any]] = {coro, stopping}
            done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopping
        if coro in done:
            coro.result()
            return True
        coro.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await coro
        return False

    async def _lead(self) -> None:
        elector = self.elector
        if elector is not None and not await self._until_stopped(
            asyncio.ensure_future(elector.acquire())
        ):
            return
        self.leading.set()
        holding = asyncio.ensure_future(elector.hold()) if elector is not None else None
        workers: list[asyncio.Task[None]] = []
        try:
            if not await self._until_stopped(asyncio.ensure_future(self.wait_synced())):
                return
            for ctrl in self._controllers:
                for kind, handler in handlers(ctrl, self.metrics):
                    self.informer(kind).add_handler(handler)
                workers += [
                    asyncio.create_task(
                        worker(ctrl, self.metrics, self.tracer, urgent_only=urgent_only),
                        name=f"{ctrl.name}{'-urgent' if urgent_only else ''}-{i}",
                    )
                    for urgent_only, count in self._pools(ctrl)
                    for i in range(count)
                ]
            if holding is not None:
                if await self._until_stopped(holding):
                    await self._cancel(workers)
                    raise LeadershipLost("the lease could not be renewed in time")
            else:
                await self._stopping.wait()
            await self._drain(workers)
        finally:
            await self._cancel(workers)
            self.leading.clear()
            if holding is not None:
                holding.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await holding
            if elector is not None:
                await elector.release()

    def _pools(self, ctrl: Controller) -> tuple[tuple[bool, int], tuple[bool, int]]:
        """(urgent only, how many) of the controller's shared workers and of those kept for its
        urgent lane (none without an urgent rule)."""
        urgent = ctrl.urgent_workers
        if urgent is None:
            urgent = self.settings.urgent_workers
        return (
            (False, ctrl.workers or self.settings.workers),
            (True, 0 if ctrl.urgent is None else urgent),
        )

    async def _drain(self, workers: list[asyncio.Task[None]]) -> None:
        for ctrl in self._controllers:
            ctrl.queue.shutdown()
        if workers:
            _, pending = await asyncio.wait(workers, timeout=self.settings.drain_timeout)
            if pending:
                log.warning("reconciles still running after the drain timeout were cancelled")

    @staticmethod
    async def _cancel(workers: list[asyncio.Task[None]]) -> None:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
