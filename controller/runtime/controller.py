"""A controller: a reconciler, the watches that feed its queue, and the workers that drain it.

    Controller(
        name="ephemeralrunner",
        for_=EPHEMERAL_RUNNER,
        reconciler=reconciler,
        owns=[Owns(POD, predicate=POD_TO_ER)],
        workers=4,
    )

- `for_`: the primary kind; every add, update and delete enqueues the object's own key, but
  for updates `predicate` drops (a reconciler's own rule that an update changes nothing it
  would do, as controller-runtime's `For(obj, WithPredicates(...))`).
- `owns`: child kinds; an event on a child enqueues the key of its controller owner (the
  ownerReference with `controller: true` whose kind is `for_`), in the child's namespace.
  `predicate` filters updates only.
- `watches`: any kind with a function mapping an object to the keys to enqueue (for example an
  AutoscalingListener to its AutoscalingRunnerSet, named in its spec).

Wake rules (a `RulePredicate`, `Owns.wake_on_delete`, `Watches.wakes`) judge the cache after the
event. A pass running on the key decided on what it read before the event, so an event for a key
in a pass always wakes it (it runs again after this pass: docs/controller-runtime.md#wake-rules);
no reconciler keeps its own "in a pass" set. A projection predicate compares the event's two
objects only: what it drops is dropped during a pass too.

`for_=None` makes a controller of keys that are not objects it watches (a namespace's runner
objects mapped to one key per namespace): its keys come from `watches` only, and it owns nothing.

Every pass is an OpenTelemetry span `reconcile <controller>` (docs/controller-runtime.md#traces),
made with the manager's tracer (the process's, set by the composition root) unless the
reconciler offers `PassTracing`, which supplies the tracer and puts the span into a trace of the
reconciler's choosing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from controller.runtime.echoes import Echoes, OwnWrite, current_echoes
from controller.runtime.lazy import copy_observer
from controller.runtime.metrics import RuntimeMetrics
from controller.runtime.predicates import VOLATILE_METADATA
from controller.runtime.queue import Backoff, WorkQueue
from controller.runtime.reconcile import Reconciler, Request, Result, TerminalError
from shared.kube.errors import Conflict, NamespaceTerminating
from shared.kube.objects import Kind
from shared.kube.views import controller_owner
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


class UpdatePredicate(Protocol):
    """Whether an update event should enqueue; `name` labels the dropped-updates metric;
    `judges_cache`: whether it reads the caches (a rule), not only the event's two objects (a
    projection), so that a pass running on the key is woken whatever it says."""

    @property
    def name(self) -> str: ...

    @property
    def judges_cache(self) -> bool: ...

    def update(self, old: object, new: object) -> bool: ...


@dataclass(frozen=True, slots=True)
class PassSpan:
    """What a reconciler puts on the span of its next pass on a key."""

    tracer: Tracer
    parent: Context | None = None
    """The context whose span is the pass span's parent (None: a trace of its own)."""
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@runtime_checkable
class PassTracing(Protocol):
    """A reconciler that chooses the tracer, parent and attributes of its passes' spans, asked
    before each pass (from its cache: no request)."""

    def pass_span(self, request: Request) -> PassSpan: ...


@dataclass(frozen=True, slots=True)
class Deferral:
    """Updates for which `test(old, new)` holds wake the reconciler `seconds` later, and every
    such update of the window rides on that one pass (docs/controller-runtime.md#deferred-wakes):
    for changes a reconciler only copies (counts into a status), never for ones it acts on."""

    test: Callable[[JSONDict, JSONDict], bool]
    seconds: float


@dataclass(frozen=True, slots=True)
class Owns:
    kind: Kind
    predicate: UpdatePredicate | None = None
    defer: Deferral | None = None
    wake_on_delete: Callable[[JSONDict], bool] | None = None
    """Whether a child's delete event wakes the owner (None: always); for owners that never
    wait for a child to go in some states (a finished runner's pod)."""


@dataclass(frozen=True, slots=True)
class Watches:
    kind: Kind
    map: Callable[[JSONDict], Iterable[Request]]
    predicate: UpdatePredicate | None = None
    wakes: Callable[[JSONDict], bool] | None = None
    """Whether an add or delete of the object wakes its keys (None: always), judged on the
    cache after the event."""


@dataclass(slots=True)
class Controller:
    name: str
    for_: Kind | None
    reconciler: Reconciler
    predicate: UpdatePredicate | None = None
    """Filters the primary's updates (adds and deletes always wake)."""
    owns: Sequence[Owns] = ()
    watches: Sequence[Watches] = ()
    workers: int | None = None
    """Concurrent reconciles (distinct keys); None takes the manager's default."""
    backoff: Backoff | None = None
    """Per-key error backoff; None takes the manager's default."""
    deleted: Callable[[Request], None] | None = None
    """Called instead of a pass when the primary object leaves the cache, for a reconciler whose
    pass on a gone object would only forget what it noted about it."""
    own_writes: frozenset[OwnWrite] = frozenset()
    """The writes of its own passes whose echo wakes nothing (docs/controller-runtime.md): the
    reconciler promises that a pass making one carries on deciding on the server's answer."""
    urgent: Callable[[JSONDict, JSONDict], bool] | None = None
    """Updates of the primary for which `urgent(old, new)` holds go to the queue's urgent lane,
    before the backlog (docs/controller-runtime.md#the-urgent-lane)."""
    urgent_workers: int | None = None
    """Workers that take urgent keys only, besides `workers` (with `urgent` only); None takes
    the manager's default."""
    queue: WorkQueue[Request] = field(init=False)
    echoes: Echoes = field(init=False)

    def __post_init__(self) -> None:
        self.echoes = Echoes(
            primary=self.for_,
            children=[owned.kind for owned in self.owns],
            ignore=self.own_writes,
        )


class _Enqueue:
    """Event handler mapping objects to keys, with an optional update predicate. Each add that
    wakes the reconciler (one not coalesced into a key already waiting) is counted by cause:
    the watch, the event, and for an update the fields that changed."""

    def __init__(
        self,
        *,
        queue: WorkQueue[Request],
        map: Callable[[JSONDict], Iterable[Request]],
        predicate: UpdatePredicate | None,
        metrics: RuntimeMetrics,
        controller: str,
        watch: str,
        kind: Kind,
        echoes: Echoes,
        defer: Deferral | None = None,
        deleted: Callable[[JSONDict], bool] | None = None,
        added: Callable[[JSONDict], bool] | None = None,
        urgent: Callable[[JSONDict, JSONDict], bool] | None = None,
    ) -> None:
        self._urgent = urgent
        self._deleted = deleted
        self._added = added
        self._kind = kind
        self._echoes = echoes
        self._defer = defer
        self._queue = queue
        self._map = map
        self._predicate = predicate
        self._metrics = metrics
        self._labels = {"controller": controller, "watch": watch}

    def _add(self, obj: JSONDict, event: str, fields: str = "", *, urgent: bool = False) -> None:
        for key in self._map(obj):
            if self._queue.add(key, urgent=urgent):
                self._metrics.wakes.add(1, {**self._labels, "event": event, "fields": fields})

    def _add_deferred(self, obj: JSONDict, fields: str) -> None:
        assert self._defer is not None
        for key in self._map(obj):
            if self._queue.add_deferred(key, self._defer.seconds):
                self._metrics.wakes.add(
                    1, {**self._labels, "event": "update deferred", "fields": fields}
                )

    def _in_pass(self, obj: JSONDict) -> bool:
        """Whether a pass is running on a key of `obj`: its wake rule judged a cache the pass
        did not decide on, so the event wakes the key whatever the rule says."""
        return any(self._queue.in_pass(key) for key in self._map(obj))

    def _echo(self, obj: JSONDict) -> bool:
        if not self._echoes.is_echo(self._kind, obj):
            return False
        self._metrics.echoes.add(1, self._labels)
        return True

    def on_add(self, obj: JSONDict) -> None:
        if self._echo(obj):
            return
        if self._added is None or self._added(obj) or self._in_pass(obj):
            self._add(obj, "add")

    def on_delete(self, obj: JSONDict) -> None:
        self._echoes.forget(self._kind, obj)
        if self._deleted is None or self._deleted(obj) or self._in_pass(obj):
            self._add(obj, "delete")

    def on_update(self, old: JSONDict, new: JSONDict) -> None:
        if self._echo(new):
            return
        if (
            self._predicate is not None
            and not self._predicate.update(old, new)
            and not (self._predicate.judges_cache and self._in_pass(new))
        ):
            self._metrics.dropped.add(1, {"watch": self._predicate.name})
            return
        fields = changed_fields(old, new)
        if self._defer is not None and self._defer.test(old, new):
            self._add_deferred(new, fields)
            return
        urgent = self._urgent is not None and self._urgent(old, new)
        # The owner may have changed between the two versions: both are told.
        self._add(old, "update", fields, urgent=urgent)
        self._add(new, "update", fields, urgent=urgent)


def changed_fields(old: JSONDict, new: JSONDict) -> str:
    """The fields an update changed, two levels deep (`status.phase,metadata.finalizers`),
    sorted; the fields every write changes (resourceVersion, managedFields) are left out."""
    paths: list[str] = []
    for section in sorted(old.keys() | new.keys()):
        before, after = old.get(section), new.get(section)
        if before == after:
            continue
        if not (isinstance(before, dict) and isinstance(after, dict)):
            paths.append(section)
            continue
        paths.extend(
            f"{section}.{name}"
            for name in sorted(before.keys() | after.keys())
            if before.get(name) != after.get(name)
            and not (section == "metadata" and name in VOLATILE_METADATA)
        )
    return ",".join(paths)


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
    sources: list[
        tuple[
            Kind,
            Callable[[JSONDict], Iterable[Request]],
            UpdatePredicate | None,
            Deferral | None,
            Callable[[JSONDict], bool] | None,
            Callable[[JSONDict], bool] | None,
            Callable[[JSONDict, JSONDict], bool] | None,
        ]
    ] = [
        *(
            (watch.kind, watch.map, watch.predicate, None, watch.wakes, watch.wakes, None)
            for watch in ctrl.watches
        )
    ]
    if ctrl.for_ is not None:
        primary = ctrl.for_
        sources[:0] = [
            (
                primary,
                _own_key,
                ctrl.predicate,
                None,
                _primary_deleted(ctrl.deleted),
                None,
                ctrl.urgent,
            ),
            *(
                (
                    owned.kind,
                    _owner_key(primary),
                    owned.predicate,
                    owned.defer,
                    owned.wake_on_delete,
                    None,
                    None,
                )
                for owned in ctrl.owns
            ),
        ]
    elif ctrl.owns:
        raise ValueError(f"controller {ctrl.name}: `owns` needs `for_`, the owners' kind")
    return [
        (
            kind,
            _Enqueue(
                queue=ctrl.queue,
                map=keys,
                predicate=predicate,
                metrics=metrics,
                controller=ctrl.name,
                watch=_watch_name(ctrl, kind, predicate),
                kind=kind,
                echoes=ctrl.echoes,
                defer=defer,
                deleted=deleted,
                added=added,
                urgent=urgent,
            ),
        )
        for kind, keys, predicate, defer, deleted, added, urgent in sources
    ]


def _primary_deleted(
    deleted: Callable[[Request], None] | None,
) -> Callable[[JSONDict], bool] | None:
    if deleted is None:
        return None

    def wake(obj: JSONDict) -> bool:
        deleted(Request.of(obj))
        return False

    return wake


def _watch_name(ctrl: Controller, kind: Kind, predicate: UpdatePredicate | None) -> str:
    """The wake metric's `watch`: the predicate's name, else `<kind>-to-<controller>`, and the
    controller's own name for its primary kind."""
    if kind == ctrl.for_:
        return ctrl.name
    if predicate is not None:
        return predicate.name
    return f"{kind.kind.lower()}-to-{ctrl.name}"


async def worker(
    ctrl: Controller, metrics: RuntimeMetrics, tracer: Tracer, *, urgent_only: bool = False
) -> None:
    """Take keys from the controller's queue (its urgent lane only, with `urgent_only`) and
    reconcile them until the queue shuts down; each pass is a span of `tracer`'s unless the
    reconciler chooses (`PassTracing`)."""
    labels = {"controller": ctrl.name}
    copy_observer.set(lambda: metrics.copies.add(1, labels))
    current_echoes.set(ctrl.echoes)
    queue = ctrl.queue
    reconciler = ctrl.reconciler
    traced = reconciler if isinstance(reconciler, PassTracing) else None
    while (key := await queue.get(urgent_only=urgent_only)) is not None:
        metrics.active.add(1, labels)
        started = time.perf_counter()
        chosen = traced.pass_span(key) if traced is not None else PassSpan(tracer)
        with chosen.tracer.start_as_current_span(
            f"reconcile {ctrl.name}",
            context=chosen.parent,
            attributes={
                **chosen.attributes,
                "controller": ctrl.name,
                "namespace": key.namespace,
                "name": key.name,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                outcome = await _reconcile(ctrl, key, span, metrics)
            finally:
                queue.done(key)
                metrics.active.add(-1, labels)
                metrics.duration.record(time.perf_counter() - started, labels)
            span.set_attribute("result", outcome)
            metrics.reconciles.add(1, {**labels, "result": outcome})


async def _reconcile(ctrl: Controller, key: Request, span: Span, metrics: RuntimeMetrics) -> str:
    """One pass on `key`: its result label, the key forgotten or requeued, the span told."""
    labels = {"controller": ctrl.name}
    queue = ctrl.queue
    try:
        result = await ctrl.reconciler.reconcile(key)
    except TerminalError as exc:
        queue.forget(key)
        metrics.errors.add(1, labels)
        _failed(span, exc)
        log.exception("reconcile failed for good", extra={**labels, "key": str(key)})
        return "terminal_error"
    except Conflict as exc:
        # A 409: another writer (often another of this controller's reconcilers) changed the
        # object since it was read, or made it first. The next pass reads the newer one: a
        # retry, not an error, logged without a traceback and not counted as one.
        delay = queue.add_rate_limited(key)
        span.set_attribute("requeue_after", delay)
        log.info(
            "reconcile met a newer version (%s); requeued in %.3f s",
            exc.reason or "Conflict",
            delay,
            extra={**labels, "key": str(key), "delay": delay, "error": str(exc)},
        )
        return "requeue"
    except NamespaceTerminating as exc:
        # Not a permission problem: a create raced the namespace's deletion (the owner's
        # deletion follows). Retried as any error, logged without a traceback.
        delay = queue.add_rate_limited(key)
        _failed(span, exc, delay)
        log.info(
            "reconcile refused, the namespace is being deleted; requeued",
            extra={**labels, "key": str(key), "delay": delay, "error": str(exc)},
        )
        return "error"
    except Exception as exc:
        delay = queue.add_rate_limited(key)
        metrics.errors.add(1, labels)
        _failed(span, exc, delay)
        log.exception(
            "reconcile failed, requeued", extra={**labels, "key": str(key), "delay": delay}
        )
        return "error"
    queue.forget(key)
    if result is not None and result.requeue_after is not None:
        queue.add_after(key, result.requeue_after)
        span.set_attribute("requeue_after", result.requeue_after)
        return "requeue_after"
    return "success"


def _failed(span: Span, exc: Exception, delay: float | None = None) -> None:
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.set_attribute("error", f"{type(exc).__name__}: {exc}")
    if delay is not None:
        span.set_attribute("requeue_after", delay)


__all__ = [
    "Controller",
    "Deferral",
    "OwnWrite",
    "Owns",
    "PassSpan",
    "PassTracing",
    "Result",
    "UpdatePredicate",
    "Watches",
    "handlers",
    "worker",
]
