"""Object storage with etcd-like revisions, a bounded event history per type, and the watch hub.

One global integer revision orders every write (docs/sandbox-kube.md#writes). Each resource
type keeps the last `history` events so a watch can resume from a resourceVersion, and answers
410 once the version has fallen out (docs/sandbox-kube.md#watch). Live watchers get events
through unbounded queues; internal controllers (kubelet, garbage collector) subscribe the same
way.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
TypeKey = tuple[str, str]
ObjKey = tuple[str, str]

# The user a write is made for: the API server sets it per request, so a subscriber can audit
# who wrote what (the demo's invariants); the emulator's own controllers write as "".
ACTOR: contextvars.ContextVar[str] = contextvars.ContextVar("actor", default="")


@dataclass(frozen=True, slots=True)
class Event:
    """One committed write. `old` is the previous state (None for ADDED); `committed_at` is
    when (time.time(), the clock of the Actions emulator's records, so that one run's records of
    both emulators line up: docs/sandbox-kube.md#request-accounting)."""

    rv: int
    type: str
    key: TypeKey
    obj: Obj
    old: Obj | None = None
    actor: str = ""
    committed_at: float = field(default_factory=time.time)


@dataclass
class Bucket:
    objects: dict[ObjKey, Obj] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=deque)
    compacted: int = 0


class Subscription:
    """A queue of events for one watcher; `None` closes it, an ApiError ends it with ERROR."""

    def __init__(self, keys: set[TypeKey] | None) -> None:
        self.keys = keys
        self.queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

    def wants(self, key: TypeKey) -> bool:
        return self.keys is None or key in self.keys


class Store:
    def __init__(self, *, history: int) -> None:
        self.rv = 0
        self.history = history
        self.buckets: dict[TypeKey, Bucket] = {}
        self.subscriptions: set[Subscription] = set()
        self.uids: dict[str, tuple[TypeKey, ObjKey]] = {}

    def bucket(self, key: TypeKey) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = Bucket(compacted=self.rv)
        return b

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def get(self, key: TypeKey, ns: str, name: str) -> Obj | None:
        return self.bucket(key).objects.get((ns, name))

    def items(self, key: TypeKey, ns: str | None = None) -> Iterator[Obj]:
        """Objects in (namespace, name) order, as etcd's key order lists them."""
        objects = self.bucket(key).objects
        # Filter before sorting: the authorizer asks for one namespace's bindings per request.
        selected = (
            objects.items() if ns is None else ((k, o) for k, o in objects.items() if k[0] == ns)
        )
        for _, obj in sorted(selected):
            yield obj

    def by_uid(self, uid: str) -> Obj | None:
        where = self.uids.get(uid)
        if where is None:
            return None
        return self.bucket(where[0]).objects.get(where[1])

    def put(self, key: TypeKey, obj: Obj, *, event: str, old: Obj | None = None) -> Obj:
        """Store `obj` under a new revision and publish ADDED or MODIFIED."""
        rv = self.next_rv()
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        okey = (meta.get("namespace", ""), meta["name"])
        self.bucket(key).objects[okey] = obj
        self.uids[meta["uid"]] = (key, okey)
        self._publish(Event(rv, event, key, obj, old, ACTOR.get()))
        return obj

    def remove(self, key: TypeKey, obj: Obj) -> Obj:
        """Remove the object; the DELETED event carries its last state with the deletion RV."""
        rv = self.next_rv()
        meta = obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        old = self.bucket(key).objects.pop(okey, None)
        self.uids.pop(meta["uid"], None)
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(rv)
        self._publish(Event(rv, "DELETED", key, final, old, ACTOR.get()))
        return final

    def _publish(self, ev: Event) -> None:
        b = self.bucket(ev.key)
        b.history.append(ev)
        while len(b.history) > self.history:
            b.compacted = b.history.popleft().rv
        for sub in list(self.subscriptions):
            if sub.wants(ev.key):
                sub.queue.put_nowait(ev)

    def events_since(self, key: TypeKey, rv: int) -> list[Event] | None:
        """Events after `rv`, or None when some of them were compacted away."""
        b = self.bucket(key)
        if rv < b.compacted:
            return None
        return [e for e in b.history if e.rv > rv]

    def compacted(self, key: TypeKey) -> int:
        return self.bucket(key).compacted

    def compact(self) -> None:
        """Forget every event up to now, as etcd compaction does (forces 410 for older RVs)."""
        for b in self.buckets.values():
            b.history.clear()
            b.compacted = self.rv

    def subscribe(self, keys: set[TypeKey] | None = None) -> Subscription:
        sub = Subscription(keys)
        self.subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self.subscriptions.discard(sub)
