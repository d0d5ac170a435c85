"""The controller runtime: what the four reconcilers are built on.

Public API (import from `controller.runtime`):

Reconcile contract (`reconcile.py`)
    `Request(namespace, name)`: the key; `Request.of(obj)`.
    `Result(requeue_after=None)`: reconcile again after a delay, without counting as an error.
    `Reconciler`: `async def reconcile(self, request: Request) -> Result`. Raising requeues the
    key with per-key exponential backoff; `TerminalError` is logged and not requeued.

Controllers (`controller.py`)
    `Controller(name=, for_=Kind, reconciler=, predicate=, owns=[Owns(kind, predicate=)],
    watches=[Watches(kind, map=obj -> Iterable[Request], predicate=, wakes=)], workers=,
    backoff=)`. Primary watches see every event but the updates their predicate drops; owned
    watches enqueue the controller owner's key; predicates filter updates only. An event for a
    key a pass is running on always wakes it (the in-pass guard is the runtime's).

Predicates (`predicates.py`)
    `ProjectionPredicate(name, kind, project)`: drops an update when old and new project to equal
    values; `stable_metadata(obj)`. The projections live with their reconcilers.
    `RulePredicate(name, wakes)`: a reconciler's own rule for its primary's updates.

Cache (`cache.py`), reached through `manager.cache(kind)`
    `Store.get(namespace, name) -> dict | None`, `Store.list(namespace=None, labels=None)`,
    `Store.owned_by(uid)` (children by controller owner uid), `Store.keys_in(namespace)`,
    `Store.count_in(namespace)` (without a scan), `len(store)`.
    Stored dicts are shared: read them, never edit them.

Writes (`lazy.py`, `shared.kube.objects`)
    `LazyObject(obj, kind=)`: `.object` to read, `.mutate()` to edit (first call deep-copies),
    `.patch()` (the RFC 7386 diff), `await .write(manager.objects, optimistic=False)`: one merge
    patch for the object and one for `/status`, each only if it changed.
    `manager.objects` (`shared.kube.objects.Objects`): get, list, create, replace, patch (merge,
    `status=True` for the subresource), delete, for any `Kind` (`POD`, `SECRET`,
    `EPHEMERAL_RUNNER`...), returning plain dicts.

Helpers (`controllerutil.py`, `events.py`, `expectations.py`)
    `add_finalizers` / `remove_finalizers` (one write each, optimistic), `has_any_finalizer`,
    `controller_reference(owner)`; `EventRecorder(objects=, component=)`: Warning events that
    never fail a reconcile; `Expectations`: the writes the cache has not shown yet, one `forget`.

Passes (`passes.py`)
    `Passes(kind=, store=, expectations=, objects=, logger=, events=)`: `.begin(request)` ->
    `Pass | None` (None: gone from the cache, its memory forgotten), `.on(obj)`,
    `.forget(request)`, `.recall(obj)` (a wake rule's read of the memory).
    `Recall` (what the process remembers of one object): `done` / `do_once` / `note` of `Step`s
    (an `Enum` member, alone or with a detail), `written_status()`, `unseen(cached)`,
    `memory(cls)` (a typed memory, forgotten with the object).
    `Pass(Recall)`: `.lazy`, `.object`, `.key`, `.uid`, `.log` (key and uid on every line),
    `write_status(desired)`, `delete(kind, obj_or_key)`, `created`, `about(uid)` (a child's
    `Recall`), `ensure(kind, desired)` -> `Ensured` (created, updated or unchanged, logged),
    `warn(reason, message)` (log and Event, once per message) / `settle(reason)`.

Manager (`manager.py`)
    `Manager(api=ApiClient, settings=RuntimeSettings(...))`: `.add(controller)`, `.cache(kind)`,
    `.objects`, `.run()`, `.stop()`, `.on_shutdown(async callback)` (awaited after the drain);
    leader election when `settings.leader_election` is set. The composition root
    (`controller/app.py`) builds it and adds the controllers.
"""

from __future__ import annotations

from controller.runtime.cache import Informer, Store, WatchSettings
from controller.runtime.controller import Controller, Deferral, Owns, UpdatePredicate, Watches
from controller.runtime.controllerutil import (
    add_finalizers,
    controller_reference,
    has_any_finalizer,
    remove_finalizers,
)
from controller.runtime.echoes import OwnWrite
from controller.runtime.events import EventRecorder
from controller.runtime.expectations import Expectations
from controller.runtime.lazy import LazyObject
from controller.runtime.manager import LeadershipLost, Manager, RuntimeSettings
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.passes import Deleted, Ensured, Pass, Passes, Recall, Step
from controller.runtime.predicates import ProjectionPredicate, RulePredicate, stable_metadata
from controller.runtime.queue import Backoff, WorkQueue
from controller.runtime.reconcile import Reconciler, Request, Result, TerminalError
from shared.clock import Clock, FakeClock, MonotonicClock
from shared.kube.lease import LeaderElector, LeaseSettings

__all__ = [
    "Backoff",
    "Clock",
    "Controller",
    "Deferral",
    "Deleted",
    "Ensured",
    "EventRecorder",
    "Expectations",
    "FakeClock",
    "Informer",
    "LazyObject",
    "LeaderElector",
    "LeadershipLost",
    "LeaseSettings",
    "Manager",
    "MonotonicClock",
    "OwnWrite",
    "Owns",
    "Pass",
    "Passes",
    "ProjectionPredicate",
    "Recall",
    "Reconciler",
    "Request",
    "Result",
    "RulePredicate",
    "RuntimeMetrics",
    "RuntimeSettings",
    "Step",
    "Store",
    "TerminalError",
    "UpdatePredicate",
    "WatchSettings",
    "Watches",
    "WorkQueue",
    "add_finalizers",
    "controller_reference",
    "has_any_finalizer",
    "remove_finalizers",
    "stable_metadata",
]
