"""Writes of this process that the cache has not shown yet (controller-runtime's ReplicaSet
"expectations", generalised), kept in one place with one `forget`.

The informer delivers a reconciler's own write some time after the write returns, and a pass that
starts in between reads the older object from the cache. Acting on it would repeat the write: a
second create of the same runners, a second unregistration, a status patch that changes nothing
but costs a request. Reconcilers record what they did here, keyed by the uid of the object it
concerns, and ask before they act:

- `note(uid, step)` / `noted(uid, step)`: a one-off step was done (a runner unregistered, its
  Secret deleted, a pod created at a time, a marker value written);
- `wrote_status` / `status_redundant` / `written_status`: status values written, and the states
  the cache showed before, so a repeat of the last write is recognised while the cache lags; a
  value someone else wrote is corrected on the next pass unless it equals one of those states;
- `created` / `deleted` / `unseen`: children created or deleted for an owner, laid over the
  cached children until the cache shows them (or `ttl` runs out);
- `memory(uid, cls)`: a reconciler's own typed memory of the object (a dataclass of its
  counters and last reports), made on first use.

`track(kind, request, uid)` remembers which uid a key held; once the key is gone from the cache,
`forget(kind, request)` drops everything about it. Reconcilers reach all of this through the
pass object (`passes.py`), which tracks, forgets and asks for them. One instance can serve
several reconcilers: uids do not collide, and a step one reconciler notes (a runner unregistered
by its set) is seen by the others.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeAlias, TypeVar, cast

from controller.runtime.reconcile import Request
from shared.kube.objects import Kind
from shared.kube.views import is_deleting, metadata_of, uid_of
from shared.typedefs import JSONDict

Step: TypeAlias = Enum | tuple[Enum, builtins.object]
"""An expectations step: a member of the reconciler's own `Enum`, alone or with a detail (a
child's uid, a replica). Never a free string: a misspelt step is a type error, not a step that
never matches."""

M = TypeVar("M")

STATUS_HISTORY = 8
DELETING = "expected"
"""The deletionTimestamp an expected deletion shows until the cache has the real one."""


@dataclass(frozen=True, slots=True)
class Note:
    value: object
    at: float


@dataclass(slots=True)
class _Record:
    notes: dict[Step, Note] = field(default_factory=dict)
    shown: list[JSONDict] = field(default_factory=list)
    """Status states the cache showed before this process's writes, and the writes themselves."""
    written: JSONDict = field(default_factory=dict)
    """Every status field this process wrote, latest value each."""
    created: dict[str, tuple[JSONDict, float]] = field(default_factory=dict)
    deleted: dict[str, tuple[str, float]] = field(default_factory=dict)
    """uid: (name, when)."""
    memories: dict[type, Any] = field(default_factory=dict)
    """The reconcilers' typed memories of the object, one instance per class."""


@dataclass(frozen=True, slots=True)
class Unseen:
    """An owner's children as this process changed them and the cache does not show yet."""

    created: list[JSONDict] = field(default_factory=list)
    """Created, not cached yet."""
    deleting: list[JSONDict] = field(default_factory=list)
    """Cached children deleted, each as a copy with a `deletionTimestamp` of `DELETING`."""


class Expectations:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic, ttl: float = 60.0) -> None:
        self._clock = clock
        self._ttl = ttl
        self._records: dict[str, _Record] = {}
        self._tracked: dict[tuple[str, Request], str] = {}

    def _record(self, uid: str) -> _Record:
        record = self._records.get(uid)
        if record is None:
            record = self._records[uid] = _Record()
        return record

    # --- lifetime ----------------------------------------------------------------------------

    def track(self, kind: Kind, request: Request, uid: str) -> None:
        """The key holds the object `uid` (called on every pass that finds it cached)."""
        self._tracked[(kind.plural, request)] = uid

    def forget(self, kind: Kind, request: Request) -> None:
        """The key's object is gone: drop everything recorded about it."""
        uid = self._tracked.pop((kind.plural, request), None)
        if uid is not None:
            self._records.pop(uid, None)

    # --- steps -------------------------------------------------------------------------------

    def note(self, uid: str, step: Step, value: object = True) -> None:
        self._record(uid).notes[step] = Note(value, self._clock())

    def noted(self, uid: str, step: Step) -> Note | None:
        record = self._records.get(uid)
        return record.notes.get(step) if record is not None else None

    def clear(self, uid: str, step: Step) -> None:
        record = self._records.get(uid)
        if record is not None:
            record.notes.pop(step, None)

    def age(self, note: Note) -> float:
        return self._clock() - note.at

    # --- typed memories ----------------------------------------------------------------------

    def memory(self, uid: str, cls: type[M]) -> M:
        """The object's instance of `cls` (made with `cls()` on first use), forgotten with the
        object."""
        memories = self._record(uid).memories
        found = memories.get(cls)
        if found is None:
            found = memories[cls] = cls()
        return cast(M, found)

    def recalled(self, uid: str, cls: type[M]) -> M | None:
        """The object's instance of `cls` if one was made (a wake rule reads, never makes)."""
        record = self._records.get(uid)
        return cast(M | None, record.memories.get(cls)) if record is not None else None

    # --- status ------------------------------------------------------------------------------

    def status_redundant(self, uid: str, *, current: JSONDict, desired: JSONDict) -> bool:
        """Whether writing `desired` (status fields) would repeat this process's last write."""
        record = self._records.get(uid)
        if record is None:
            return False
        shown = {k: current.get(k) for k in desired}
        return all(record.written.get(k) == v for k, v in desired.items()) and shown in record.shown

    def wrote_status(self, uid: str, *, current: JSONDict, desired: JSONDict) -> None:
        record = self._record(uid)
        shown = {k: current.get(k) for k in desired}
        record.shown = [*record.shown, shown, dict(desired)][-STATUS_HISTORY:]
        record.written = {**record.written, **desired}

    def written_status(self, uid: str) -> JSONDict:
        """Every status field this process wrote for the object, latest value each."""
        record = self._records.get(uid)
        return dict(record.written) if record is not None else {}

    # --- children ----------------------------------------------------------------------------

    def created(self, owner_uid: str, child: JSONDict) -> None:
        self._record(owner_uid).created[metadata_of(child)["name"]] = (child, self._clock())

    def deleted(self, owner_uid: str, child: JSONDict) -> None:
        meta = metadata_of(child)
        self._record(owner_uid).deleted[str(meta.get("uid", ""))] = (
            str(meta.get("name", "")),
            self._clock(),
        )

    def observed(self, owner_uid: str, name: str) -> None:
        """The cache has shown a child this process created: it is no longer unseen, even when
        it goes again before its owner's next pass (else it would be laid over the cached
        children as created until `ttl` runs out). Called by an informer handler."""
        record = self._records.get(owner_uid)
        if record is not None:
            record.created.pop(name, None)

    def unseen(self, owner_uid: str, cached: Callable[[str], JSONDict | None]) -> Unseen:
        """What the cache does not show yet of the owner's children this process created or
        deleted, given the cache's child of a name. Costs one lookup per child created or
        deleted and not yet shown, whatever the number of children: an owner's pass need not
        walk all its children to lay these over them."""
        record = self._records.get(owner_uid)
        if record is None:
            return Unseen()
        now = self._clock()
        record.created = {
            name: (obj, at)
            for name, (obj, at) in record.created.items()
            if cached(name) is None and now - at < self._ttl
        }
        deleting: list[JSONDict] = []
        kept: dict[str, tuple[str, float]] = {}
        for uid, (name, at) in record.deleted.items():
            child = cached(name)
            if child is None or is_deleting(child) or now - at >= self._ttl:
                continue
            if uid_of(child) != uid:
                continue
            kept[uid] = (name, at)
            deleting.append(
                {**child, "metadata": {**child["metadata"], "deletionTimestamp": DELETING}}
            )
        record.deleted = kept
        return Unseen(created=[obj for obj, _ in record.created.values()], deleting=deleting)
