"""A controller: a reconciler, the watches that feed its queue, and the workers that drain it.

    Controller(
        name="ephemeralrunner",
        for_=EPHEMERAL_RUNNER,
        reconciler=reconciler,
        owns=[Owns(POD, predicate=POD_TO_ER)],
        workers=4,
    )

- `for_`: the primary kind; every add, update and delete enqueues the object's own key.
- `owns`: child kinds; an event on a child enqueues the key of its controller owner (the
  ownerReference with `controller: true` whose kind is `for_`), in the child's namespace.
  `predicate` filters updates only.
- `watches`: any kind with a function mapping an object to the keys to enqueue (for example an
  AutoscalingListener to its AutoscalingRunnerSet, named in its spec).

`for_=None` makes a controller of keys that are not objects it watches (a namespace's runner
objects mapped to one key per namespace): its keys come from `watches` only, and it owns nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller.runtime.cache import controller_owner
from controller.runtime.lazy import copy_observer
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.queue import Backoff, WorkQueue
from controller.runtime.reconcile import Reconciler, Request, Result, TerminalError
from shared.kube.errors import NamespaceTerminating
from shared.kube.objects import Kind
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


class UpdatePredicate(Protocol):
    """Whether an update event should enqueue; `name` labels the dropped-updates metric."""

    @property
    def name(self) -> str: ...

    def update(self, old: object, new: object) -> bool: ...


@dataclass(frozen=True, slots=True)
class Owns:
    kind: Kind
    predicate: UpdatePredicate | None = None


@dataclass(frozen=True, slots=True)
class Watches:
    kind: Kind
    map: Callable[[JSONDict], Iterable[Request]]
    predicate: UpdatePredicate | None = None


@dataclass(slots=True)
class Controller:
    name: str
    for_: Kind | None
    reconciler: Reconciler
    owns: Sequence[Owns] = ()
    watches: Sequence[Watches] = ()
    workers: int | None = None
    """Concurrent reconciles (distinct keys); None takes the manager's default."""
    backoff: Backoff | None = None
    """Per-key error backoff; None takes the manager's default."""
    queue: WorkQueue[Request] = field(init=False)


class _Enqueue:
    """Event handler mapping objects to keys, with an optional update predicate."""

    def __init__(
        self,
        *,
        queue: WorkQueue[Request],
        map: Callable[[JSONDict], Iterable[Request]],
        predicate: UpdatePredicate | None,
        metrics: RuntimeMetrics,
    ) -> None:
        self._queue = queue
        self._map = map
        self._predicate = predicate
        self._metrics = metrics

    def _add(self, obj: JSONDict) -> None:
        for key in self._map(obj):
            self._queue.add(key)

    def on_add(self, obj: JSONDict) -> None:
        self._add(obj)

    def on_delete(self, obj: JSONDict) -> None:
        self._add(obj)

    def on_update(self, old: JSONDict, new: JSONDict) -> None:
        if self._predicate is not None and not self._predicate.update(old, new):
            self._metrics.dropped.add(1, {"watch": self._predicate.name})
            return
        # The owner may have changed between the two versions: both are told.
        self._add(old)
        self._add(new)


def _own_key(obj: JSONDict) -> Iterable[Request]:
    return (Request.of(obj),)


def _owner_key(owner: Kind) -> Callable[[JSONDict], Iterable[Request]]:
    def keys(obj: JSONDict) -> Iterable[Request]:
        ref = controller_owner(obj)
        if (
            ref is None
            or ref.get("kind") != owner.kind
            or ref.get("apiVersion") != owner.api_version
        ):
            return ()
        return (Request((obj.get("metadata") or {}).get("namespace", ""), str(ref["name"])),)

    return keys


def handlers(ctrl: Controller, metrics: RuntimeMetrics) -> list[tuple[Kind, _Enqueue]]:
    """The event handlers to register on each informer for this controller."""
    sources: list[tuple[Kind, Callable[[JSONDict], Iterable[Request]], UpdatePredicate | None]] = [
        *((watch.kind, watch.map, watch.predicate) for watch in ctrl.watches)
    ]
    if ctrl.for_ is not None:
        primary = ctrl.for_
        sources[:0] = [
            (primary, _own_key, None),
            *((owned.kind, _owner_key(primary), owned.predicate) for owned in ctrl.owns),
        ]
    elif ctrl.owns:
        raise ValueError(f"controller {ctrl.name}: `owns` needs `for_`, the owners' kind")
    return [
        (kind, _Enqueue(queue=ctrl.queue, map=keys, predicate=predicate, metrics=metrics))
        for kind, keys, predicate in sources
    ]


async def worker(ctrl: Controller, metrics: RuntimeMetrics) -> None:
    """Take keys from the controller's queue and reconcile them until the queue shuts down."""
    labels = {"controller": ctrl.name}
    copy_observer.set(lambda: metrics.copies.add(1, labels))
    queue = ctrl.queue
    while (key := await queue.get()) is not None:
        metrics.active.add(1, labels)
        started = time.perf_counter()
        try:
            result = await ctrl.reconciler.reconcile(key)
        except TerminalError:
            queue.forget(key)
            metrics.errors.add(1, labels)
            metrics.reconciles.add(1, {**labels, "result": "terminal_error"})
            log.exception("reconcile failed for good", extra={**labels, "key": str(key)})
        except NamespaceTerminating as exc:
            # Not a permission problem: a create raced the namespace's deletion (the owner's
            # deletion follows). Retried as any error, logged without a traceback.
            delay = queue.add_rate_limited(key)
            metrics.reconciles.add(1, {**labels, "result": "error"})
            log.info(
                "reconcile refused, the namespace is being deleted; requeued",
                extra={**labels, "key": str(key), "delay": delay, "error": str(exc)},
            )
        except Exception:
            delay = queue.add_rate_limited(key)
            metrics.errors.add(1, labels)
            metrics.reconciles.add(1, {**labels, "result": "error"})
            log.exception(
                "reconcile failed, requeued", extra={**labels, "key": str(key), "delay": delay}
            )
        else:
            queue.forget(key)
            if result is not None and result.requeue_after is not None:
                queue.add_after(key, result.requeue_after)
                metrics.reconciles.add(1, {**labels, "result": "requeue_after"})
            else:
                metrics.reconciles.add(1, {**labels, "result": "success"})
        finally:
            queue.done(key)
            metrics.active.add(-1, labels)
            metrics.duration.record(time.perf_counter() - started, labels)


__all__ = ["Controller", "Owns", "Result", "UpdatePredicate", "Watches", "handlers", "worker"]
