"""The controller runtime: what the four reconcilers are built on.

Public API (import from `controller.runtime`):

Reconcile contract (`reconcile.py`)
    `Request(namespace, name)`: the key; `Request.of(obj)`.
    `Result(requeue_after=None)`: reconcile again after a delay, without counting as an error.
    `Reconciler`: `async def reconcile(self, request: Request) -> Result`. Raising requeues the
    key with per-key exponential backoff; `TerminalError` is logged and not requeued.

Controllers (`controller.py`)
    `Controller(name=, for_=Kind, reconciler=, owns=[Owns(kind, predicate=)],
    watches=[Watches(kind, map=obj -> Iterable[Request], predicate=)], workers=, backoff=)`.
    Primary watches see every event; owned watches enqueue the controller owner's key;
    predicates filter updates only.

Predicates (`predicates.py`)
    `ERS_TO_ARS`, `ER_TO_ERS`, `POD_TO_ER` (design.md behaviour 2), their projection functions,
    and `pod_ready(pod)`: the single definition of readiness.

Cache (`cache.py`), reached through `manager.cache(kind)`
    `Store.get(namespace, name) -> dict | None`, `Store.list(namespace=None, labels=None)`,
    `Store.owned_by(uid)` (children by controller owner uid), `Store.keys_in(namespace)`,
    `len(store)`.
    Stored dicts are shared: read them, never edit them.

Writes (`lazy.py`, `shared.kube.objects`)
    `LazyObject(obj, kind=)`: `.object` to read, `.mutate()` to edit (first call deep-copies),
    `.patch()` (the RFC 7386 diff), `await .write(manager.objects, optimistic=False)`: one merge
    patch for the object and one for `/status`, each only if it changed.
    `manager.objects` (`shared.kube.objects.Objects`): get, list, create, replace, patch (merge,
    `status=True` for the subresource), delete, for any `Kind` (`POD`, `SECRET`,
    `EPHEMERAL_RUNNER`...), returning plain dicts.

Manager (`manager.py`) and process registry (`registry.py`)
    `Manager(api=ApiClient, settings=RuntimeSettings(...))`: `.add(controller)`, `.cache(kind)`,
    `.objects`, `.run()`, `.stop()`, `.on_shutdown(async callback)` (awaited after the drain);
    leader election when `settings.leader_election` is set.
    `REGISTRY.register(setup)`: `setup(manager)` adds a controller to the `gha-controller`
    process.
"""

from __future__ import annotations

from controller.runtime.cache import Informer, Store, WatchSettings
from controller.runtime.clock import Clock, FakeClock, MonotonicClock
from controller.runtime.controller import Controller, Owns, UpdatePredicate, Watches
from controller.runtime.lazy import LazyObject
from controller.runtime.leader import LeaderElector, LeaseSettings
from controller.runtime.manager import LeadershipLost, Manager, RuntimeSettings
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.predicates import (
    ER_TO_ERS,
    ERS_TO_ARS,
    POD_TO_ER,
    ProjectionPredicate,
    pod_ready,
)
from controller.runtime.queue import Backoff, WorkQueue
from controller.runtime.reconcile import Reconciler, Request, Result, TerminalError
from controller.runtime.registry import REGISTRY, Registry

__all__ = [
    "ERS_TO_ARS",
    "ER_TO_ERS",
    "POD_TO_ER",
    "REGISTRY",
    "Backoff",
    "Clock",
    "Controller",
    "FakeClock",
    "Informer",
    "LazyObject",
    "LeaderElector",
    "LeadershipLost",
    "LeaseSettings",
    "Manager",
    "MonotonicClock",
    "Owns",
    "ProjectionPredicate",
    "Reconciler",
    "Registry",
    "Request",
    "Result",
    "RuntimeMetrics",
    "RuntimeSettings",
    "Store",
    "TerminalError",
    "UpdatePredicate",
    "WatchSettings",
    "Watches",
    "WorkQueue",
    "pod_ready",
]
