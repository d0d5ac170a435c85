"""Informers: one list-then-watch loop per kind and namespace scope, feeding a shared store.

The store is the reconcilers' read path. It holds the dicts the server sent (with `kind` and
`apiVersion` stamped on list items, which the server omits there), indexed by key and by the uid
of each object's controller owner. Stored dicts are shared and must never be edited: reconcilers
wrap them in `LazyObject` to change them.

Before an object is stored it goes through the informer's transform (`Transform`, as
controller-runtime's cache transforms): `metadata.managedFields` and kubectl's
last-applied-configuration annotation are dropped (`strip`), then every field no reader declared
(`Transform.reads`, `Transform.narrow`), and the rest is rebuilt in fresh containers with equal
labels, annotations, finalizers and specs shared between objects (`Subtrees`). What is left is
what the reconcilers read (docs/controller-runtime.md#what-the-cache-keeps).

The loop (why this one: docs/controller-runtime.md#informers): list, then watch from the list's
resourceVersion with bookmarks; a stream that ends normally is resumed from the last
resourceVersion seen; a 410 means the history is gone, so re-list and emit the difference as
events; a stream silent for longer than the inactivity timeout is abandoned and resumed; a
refusal that says when to come back (a 429 with `Retry-After`, as while the API server's watch
cache initialises after a restart) waits that long; other errors back off and retry. The backoff
starts over once the server answers again (a list, or a watch that was established), so an
outage of any length costs one reconnect after it ends (docs/controller-runtime.md#informers).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import to_json

from controller.runtime.echoes import from_list
from controller.runtime.reconcile import Request
from shared.backoff import doubling
from shared.clock import Clock, MonotonicClock
from shared.kube.errors import Gone, KubeError
from shared.kube.objects import Kind, Objects
from shared.kube.views import controller_owner_uid
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ALWAYS_KEPT = frozenset({"apiVersion", "kind", "metadata"})

Shape = Mapping[str, "Shape | None"]
"""What a reader reads of a JSON object: the keys kept, each with the shape of its value (None:
the whole value). A list's object items each take the list's shape."""

SHARED = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("metadata", "finalizers"),
    ("spec",),
)
"""Where equal values recur across a kind's objects: a set's runners carry the same labels,
annotations, finalizers and the spec (pod template) copied from the set; their pods the same
labels and annotations."""


def strip(obj: JSONDict) -> JSONDict:
    """`obj` without what no reconciler reads, in place: the field managers' records and the
    last `kubectl apply`'s copy of the whole object (controller-runtime drops managedFields
    from its cache by default too)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    return obj


def project(value: Any, shape: Shape | None) -> Any:
    """A copy of `value` with only what `shape` keeps, in new containers (None: all of it).
    Built fresh rather than pruned in place, so the decoded object, the API server's whole
    answer, is freed at once instead of pinning the memory it was decoded into."""
    if isinstance(value, dict):
        if shape is None:
            return {k: project(v, None) for k, v in value.items()}
        return {k: project(v, shape[k]) for k, v in value.items() if k in shape}
    if isinstance(value, list):
        return [project(v, shape) for v in value]
    return value


def merge(a: Shape, b: Shape) -> Shape:
    """What two readers read together."""
    out: dict[str, Shape | None] = {}
    for key in {*a, *b}:
        x, y = a.get(key, {}), b.get(key, {})
        out[key] = None if x is None or y is None else merge(x, y)
    return out


class Subtrees:
    """One copy of each distinct value at the `SHARED` paths of a kind's stored objects: the
    thousandth runner of a set holds the same labels, finalizers and spec dicts as the first.
    Sharing is safe because stored objects are never edited (reconcilers copy them first:
    `LazyObject`).

    A value is found by its JSON text. Values no stored object holds any more are dropped when
    the table has doubled since the last sweep, so the table stays within twice the distinct
    values in use."""

    MIN_SWEEP = 256

    def __init__(self) -> None:
        self._values: dict[bytes, Any] = {}
        self._sweep_at = self.MIN_SWEEP

    def __len__(self) -> int:
        return len(self._values)

    def share(self, obj: JSONDict) -> JSONDict:
        """`obj`, its values at the shared paths replaced by the equal ones already held."""
        for path in SHARED:
            parent: Any = obj
            for key in path[:-1]:
                parent = parent.get(key)
                if not isinstance(parent, dict):
                    break
            else:
                value = parent.get(path[-1])
                if value:
                    parent[path[-1]] = self._one(value)
        return obj

    def _one(self, value: Any) -> Any:
        key = to_json(value)
        held = self._values.setdefault(key, value)
        if held is value and len(self._values) >= self._sweep_at:
            self.sweep()
        return held

    def sweep(self) -> None:
        """Drop the values only this table refers to: two references, the table's and
        `getrefcount`'s argument."""
        values = self._values
        unused = [k for k in values if sys.getrefcount(values[k]) <= 2]
        for key in unused:
            del self._values[key]
        self._sweep_at = max(self.MIN_SWEEP, 2 * len(self._values))


class Transform:
    """What an informer's store keeps of each object its list or watch delivers (as
    controller-runtime's cache transforms): a new object (the decoded one is not kept) without
    managedFields and the last-applied annotation (`strip`), with only the top-level fields its
    readers declared (`reads`) and of those only what `narrow` keeps, sharing equal subtrees
    with the objects stored before it (`Subtrees`)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.kept: frozenset[str] | None = None
        """The top-level fields kept; None for all of them."""
        self._whole = False
        self._narrowed: dict[str, Shape] = {}
        self.subtrees = Subtrees()

    def reads(self, fields: Collection[str] | None) -> None:
        """Declare what one reader of the store reads: top-level fields beside `metadata` (e.g.
        `("status",)`), or None for whole objects. The store keeps the union of what its
        readers declared, and whole objects once one declared None. The event handlers see
        what the store keeps."""
        if fields is None:
            self._whole, self.kept = True, None
        elif not self._whole:
            self.kept = frozenset({*(self.kept or ALWAYS_KEPT), *fields})

    def narrow(self, field: str, shape: Shape) -> None:
        """Of a top-level field, keep only `shape`: what every reader of the kind reads of it
        (the composition root declares it for all of them, as controller-runtime's
        `ByObject.Transform`; tests check each reader against it). Calls add up."""
        current = self._narrowed.get(field)
        self._narrowed[field] = shape if current is None else merge(current, shape)

    def __call__(self, obj: JSONDict) -> JSONDict:
        strip(obj)
        kept = {
            field: project(value, self._narrowed.get(field))
            for field, value in obj.items()
            if self.kept is None or field in self.kept
        }
        kept.setdefault("kind", self.kind.kind)
        kept.setdefault("apiVersion", self.kind.api_version)
        return self.subtrees.share(kept)


class Store:
    """Objects of one kind by key, and by controller owner uid. Read-only outside the informer."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self._objects: dict[Request, JSONDict] = {}
        # Per owner, keys in the order first seen (a dict as an ordered set): owned_by() then
        # needs no sort, which at hundreds of children per owner cost more than the reconcile.
        self._owned: dict[str, dict[Request, None]] = {}
        self._owner_of: dict[Request, str] = {}
        self._in_namespace: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[JSONDict]:
        return iter(list(self._objects.values()))

    def get(self, namespace: str, name: str) -> JSONDict | None:
        return self._objects.get(Request(namespace, name))

    def count_in(self, namespace: str) -> int:
        """How many objects are in `namespace`, without looking at them (a question asked on
        every event of a kind: a scan would make each event cost O(N))."""
        return self._in_namespace.get(namespace, 0)

    def keys_in(self, namespace: str | None = None) -> builtins.list[Request]:
        """Keys of the objects in `namespace` (all when None)."""
        return [k for k in self._objects if namespace is None or k.namespace == namespace]

    def list(
        self, namespace: str | None = None, *, labels: Mapping[str, str] | None = None
    ) -> list[JSONDict]:
        """Objects in `namespace` (all when None) whose labels include every pair of `labels`."""
        out = []
        for key, obj in self._objects.items():
            if namespace is not None and key.namespace != namespace:
                continue
            if labels:
                have = (obj.get("metadata") or {}).get("labels") or {}
                if any(have.get(k) != v for k, v in labels.items()):
                    continue
            out.append(obj)
        return out

    def owned_by(self, uid: str) -> builtins.list[JSONDict]:
        """Objects whose controller owner has this uid, in the order the cache first saw them."""
        return [self._objects[key] for key in self._owned.get(uid, ())]

    def upsert(self, obj: JSONDict) -> JSONDict | None:
        key = Request.of(obj)
        old = self._objects.get(key)
        self._objects[key] = obj
        if old is None:
            self._in_namespace[key.namespace] = self._in_namespace.get(key.namespace, 0) + 1
        uid = controller_owner_uid(obj)
        if self._owner_of.get(key) != uid:
            self._unindex(key)
            if uid is not None:
                self._owned.setdefault(uid, {})[key] = None
                self._owner_of[key] = uid
        return old

    def remove(self, key: Request) -> JSONDict | None:
        self._unindex(key)
        old = self._objects.pop(key, None)
        if old is not None:
            left = self._in_namespace[key.namespace] - 1
            if left:
                self._in_namespace[key.namespace] = left
            else:
                del self._in_namespace[key.namespace]
        return old

    def _unindex(self, key: Request) -> None:
        uid = self._owner_of.pop(key, None)
        if uid is not None:
            keys = self._owned[uid]
            keys.pop(key, None)
            if not keys:
                del self._owned[uid]


class EventHandler(Protocol):
    def on_add(self, obj: JSONDict) -> None: ...

    def on_update(self, old: JSONDict, new: JSONDict) -> None: ...

    def on_delete(self, obj: JSONDict) -> None: ...


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """Timeouts of the list-watch loop (seconds)."""

    server_timeout: int = 300
    """timeoutSeconds asked of the server: it closes the stream then and we resume from the last
    resourceVersion, which bounds how long any one connection can go wrong unnoticed."""
    inactivity_timeout: float = 70.0
    """A stream that sends nothing (not even a bookmark, which servers send about every 60 s)
    for this long is treated as dead: a half-open connection would otherwise hang forever."""
    request_timeout: float = 30.0
    """Total time for the list request."""
    connect_timeout: float = 10.0
    page_size: int = 500
    """Objects per list request: a large list is read in pages, so neither the server nor this
    process holds one giant response (client-go's reflector pages by 500 as well)."""
    retry_base: float = 0.2
    """First delay after a failed list or watch; doubles per consecutive failure."""
    retry_max: float = 30.0
    retry_after_max: float = 300.0
    """The longest `Retry-After` honoured: a proxy asking for hours cannot stall the cache."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What one list-watch loop covers: a namespace (None: all) and a label selector (None:
    every object there)."""

    namespace: str | None
    selector: str | None = None


class Informer:
    def __init__(
        self,
        *,
        objects: Objects,
        kind: Kind,
        namespaces: Iterable[str] | None = None,
        settings: WatchSettings | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.kind = kind
        self.store = Store(kind)
        self.settings = settings or WatchSettings()
        self._clock = clock or MonotonicClock()
        self.namespaces: tuple[str | None, ...] = (
            tuple(sorted(set(namespaces))) if namespaces is not None else (None,)
        )
        self.scopes: tuple[Scope, ...] = tuple(Scope(ns) for ns in self.namespaces)
        self.lists = 0
        self.failures = 0
        """Lists and watches that failed (timeouts included), for tests and logs."""
        self._objects = objects
        self._handlers: list[EventHandler] = []
        self._listed: set[Scope] = set()
        # Per scope, the last resourceVersion a watch delivered: where to resume after a
        # watch that broke mid-stream.
        self._seen: dict[Scope, str] = {}
        # When scopes can overlap (an object matching two selectors), the scopes whose list or
        # watch last had each key: it leaves the store when it left all of them.
        self._held: dict[Request, set[Scope]] | None = None
        self.synced = asyncio.Event()
        self.transform = Transform(kind)

    def reads(self, fields: Collection[str] | None) -> None:
        """Before `run`: what one reader of the store reads (`Transform.reads`)."""
        self.transform.reads(fields)

    def narrow(self, field: str, shape: Shape) -> None:
        """Before `run`: what every reader reads of a top-level field (`Transform.narrow`)."""
        self.transform.narrow(field, shape)

    def select(self, selectors: Collection[str], *, whole: Collection[str] = ()) -> None:
        """Before `run`: keep only the objects that match one of the label `selectors`, and
        every object of the namespaces in `whole` (those in scope). One list-watch loop per
        selector and namespace in scope, each asking the server for its selection, so what no
        reader wants never reaches this process (controller-runtime's `ByObject` label
        selectors do the same)."""
        scopes = []
        for namespace in self.namespaces:
            if namespace is not None and namespace in whole:
                scopes.append(Scope(namespace))
            else:
                scopes += [Scope(namespace, selector) for selector in sorted(selectors)]
        if self.namespaces == (None,):
            scopes += [Scope(namespace) for namespace in sorted(whole)]
        self.scopes = tuple(scopes)
        namespaces = [scope.namespace for scope in scopes]
        if len(set(namespaces)) < len(namespaces) or (None in namespaces and len(scopes) > 1):
            self._held = {}

    def add_handler(self, handler: EventHandler) -> None:
        """Receive every change from now on, and an add for each object already stored."""
        self._handlers.append(handler)
        for obj in self.store:
            self._emit("on_add", handler, obj)

    async def run(self) -> None:
        """List and watch every scope until cancelled."""
        async with asyncio.TaskGroup() as group:
            for scope in self.scopes:
                group.create_task(self._reflect(scope))

    def _emit(self, method: str, handler: EventHandler, *args: JSONDict) -> None:
        try:
            getattr(handler, method)(*args)
        except Exception:
            log.exception("event handler failed", extra={"kind": self.kind.kind})

    def _notify(self, method: str, *args: JSONDict) -> None:
        for handler in self._handlers:
            self._emit(method, handler, *args)

    def _upsert(self, obj: JSONDict, scope: Scope) -> None:
        """Store `obj`, transformed already."""
        if self._held is not None:
            key = Request.of(obj)
            held = self._held.setdefault(key, set())
            held.add(scope)
            current = self.store.get(key.namespace, key.name)
            if len(held) > 1 and current is not None and _older(obj, current):
                # Another scope's stream delivered a later version already.
                return
        old = self.store.upsert(obj)
        if old is None:
            self._notify("on_add", obj)
        elif (old.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
            "resourceVersion"
        ):
            self._notify("on_update", old, obj)

    def _delete(self, obj: JSONDict, scope: Scope) -> None:
        key = Request.of(obj)
        if self._held is not None and key in self._held:
            self._held[key].discard(scope)
            if self._held[key]:
                return
            del self._held[key]
        old = self.store.remove(key)
        if old is not None:
            self._notify("on_delete", obj)

    async def _list(self, scope: Scope) -> str:
        """Replace the scope's part of the store with a fresh list; its resourceVersion.

        Read in pages, each transformed as it arrives and then dropped, so the list never holds
        more than one page of whole objects (client-go's reflector pages the same way); an
        object listed at the version already stored is kept as stored, so a re-list of an
        unchanged cache allocates one page. The store changes once the last page is in, so
        handlers never see half a list; an expired continue token is a 410 and restarts the
        list.
        """
        listed: dict[Request, JSONDict] = {}
        token: str | None = None
        while True:
            page = await asyncio.wait_for(
                self._objects.list(
                    self.kind,
                    scope.namespace,
                    label_selector=scope.selector,
                    limit=self.settings.page_size,
                    continue_token=token,
                ),
                self.settings.request_timeout,
            )
            for item in page.get("items") or []:
                key = Request.of(item)
                stored = self.store.get(key.namespace, key.name)
                if stored is not None and _version(stored) == _version(item):
                    listed[key] = stored
                else:
                    listed[key] = self.transform(item)
            meta = page.get("metadata") or {}
            del page
            token = meta.get("continue") or None
            if token is None:
                break
        self.lists += 1
        listing = from_list.set(True)
        try:
            for obj in listed.values():
                self._upsert(obj, scope)
            for key in self.store.keys_in(scope.namespace):
                if key in listed or (
                    self._held is not None and scope not in self._held.get(key, ())
                ):
                    continue
                gone = self.store.get(key.namespace, key.name)
                if gone is not None:
                    self._delete(gone, scope)
        finally:
            from_list.reset(listing)
        self._listed.add(scope)
        if len(self._listed) == len(self.scopes):
            self.synced.set()
        return str(meta.get("resourceVersion", ""))

    async def _watch(self, scope: Scope, resource_version: str) -> str:
        """Apply watch events until the stream ends; the last resourceVersion seen."""
        stream = self._objects.watch(
            self.kind,
            scope.namespace,
            resource_version=resource_version,
            timeout_seconds=self.settings.server_timeout,
            inactivity_timeout=self.settings.inactivity_timeout,
            connect_timeout=self.settings.connect_timeout,
            label_selector=scope.selector,
        )
        self._seen[scope] = resource_version
        async with contextlib.aclosing(stream):
            async for event in stream:
                kind, obj = event.get("type"), event.get("object")
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                if not isinstance(obj, dict) or not isinstance(meta, dict):
                    log.warning("watch event without an object skipped", extra={"type": kind})
                    continue
                if kind != "BOOKMARK" and not meta.get("name"):
                    log.warning("watch event without a name skipped", extra={"type": kind})
                    continue
                rv = meta.get("resourceVersion")
                if kind in ("ADDED", "MODIFIED"):
                    self._upsert(self.transform(obj), scope)
                elif kind == "DELETED":
                    self._delete(self.transform(obj), scope)
                elif kind != "BOOKMARK":
                    log.warning("unknown watch event type skipped", extra={"type": kind})
                    continue
                if rv:
                    resource_version = str(rv)
                    self._seen[scope] = resource_version
        return resource_version

    async def _reflect(self, scope: Scope) -> None:
        resource_version: str | None = None
        failures = 0
        loop = asyncio.get_running_loop()
        while True:
            opened = loop.time()
            try:
                if resource_version is None:
                    resource_version = await self._list(scope)
                    # The server answers again: whatever failed before is over, so the next
                    # failure waits retry_base, not what an outage had grown the delay to.
                    failures = 0
                    opened = loop.time()
                resource_version = await self._watch(scope, resource_version)
                failures = 0
            except Gone:
                log.info("watch history gone, re-listing", extra={"kind": self.kind.kind})
                resource_version = None
            except (KubeError, TimeoutError) as exc:
                seen = self._seen.get(scope)
                if resource_version is not None and seen not in (None, resource_version):
                    # The watch delivered events before it broke: resume where it got to, and
                    # a healthy stream cut after minutes is not one more failure in a row (else
                    # a few cuts make every reconnect wait retry_max with a stale cache).
                    resource_version, failures = seen, 0
                elif loop.time() - opened >= self.settings.inactivity_timeout:
                    # Open that long, the watch was established (a server down refuses at
                    # once, an unreachable one within connect_timeout): a quiet stream ended
                    # by the inactivity watchdog, as after a restart when the server sends no
                    # bookmark, is not a failure in a row either. Each such attempt takes the
                    # inactivity timeout, so retrying at once cannot hammer the server.
                    failures = 0
                delay = doubling(self.settings.retry_base, failures, self.settings.retry_max)
                if isinstance(exc, KubeError) and exc.retry_after:
                    # The server said when to come back (a 429 while its watch cache
                    # initialises after a restart): sooner is refused again, later is stale.
                    delay = min(exc.retry_after, self.settings.retry_after_max)
                failures += 1
                self.failures += 1
                # The kind and the cause in the line itself: the text format shows no fields.
                log.warning(
                    "list or watch of %s failed (%s), retrying in %.1f s",
                    self.kind.kind,
                    str(exc) or type(exc).__name__,
                    delay,
                    extra={"kind": self.kind.kind, "error": str(exc), "delay": delay},
                )
                await self._clock.sleep(delay)


def _version(obj: JSONDict) -> object:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _older(obj: JSONDict, than: JSONDict) -> bool:
    """Whether `obj` is an earlier version than `than`. resourceVersions are opaque to clients
    but etcd's revisions, integers that only grow, on every API server; one that is not an
    integer is never taken as older."""
    new = (obj.get("metadata") or {}).get("resourceVersion")
    old = (than.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(new)) < int(str(old))
    except ValueError:
        return False
