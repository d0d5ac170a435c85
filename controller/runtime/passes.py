"""One reconcile pass over one object (docs/controller-runtime.md#the-pass-object).

Every reconciler starts its pass the same way: read the key from the cache, remember which uid
it holds (so `Expectations.forget` can drop it once it is gone), and then, all through the pass,
ask what this process remembers about that uid before acting. `Passes` does the start, `Pass`
carries the rest:

    passes = Passes(kind=EPHEMERAL_RUNNER_SET, store=sets, expectations=expected,
                    objects=objects, events=events, logger=log)

    async def reconcile(self, request):
        p = passes.begin(request)      # None: gone from the cache, and forgotten
        if p is None:
            return Result()
        ...
        await p.write_status({"phase": "Running"})   # skipped when redundant; recorded
        await p.ensure(SECRET, desired)               # created, updated or unchanged; logged
        await p.warn("Refused", message)              # log and Event, once per message
        if not p.done(Step.MARKER):
            ...
            p.note(Step.MARKER)

What the process remembers about one object is its `Recall`: steps (members of an `Enum` of
the reconciler, or `(member, detail)` for a step repeated per child, never free strings), the
status it wrote, the children it created and deleted that the cache does not show yet, and typed
memories (`memory(cls)`). A pass is the `Recall` of its object; `p.about(uid)` is a child's;
`Passes.recall(obj)` is the one a wake rule reads. All of it is forgotten with the object.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, MutableMapping, Sequence
from enum import Enum
from typing import Any

from controller.runtime.cache import Store
from controller.runtime.events import EventRecorder
from controller.runtime.expectations import Expectations, M, Note, Step, Unseen
from controller.runtime.lazy import LazyObject
from controller.runtime.reconcile import Request
from shared.kube.errors import AlreadyExists, NotFound
from shared.kube.objects import Kind, Objects
from shared.kube.views import controller_owner_uid, metadata_of, status_of, uid_of
from shared.typedefs import JSONDict

__all__ = [
    "Deleted",
    "Ensured",
    "Pass",
    "Passes",
    "Recall",
    "Step",
    "deep_merge",
    "field_drift",
]


class _Warned(Enum):
    WARNED = "warned"


class _Read:
    """`Pass.ensure`'s default `current`: read the object from the API."""


class PassLogger(logging.LoggerAdapter[logging.Logger]):
    """Prefixes every line with the key and puts `key` and `uid` in its `extra` fields."""

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        extra = self.extra or {}
        kwargs["extra"] = {**extra, **(kwargs.get("extra") or {})}
        return f"{extra['key']}: {msg}", kwargs


def deep_merge(target: JSONDict, patch: JSONDict) -> None:
    """Merge `patch` into `target`, nested dicts key by key."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_merge(target[key], value)
        else:
            target[key] = value


class Ensured(Enum):
    """What `Pass.ensure` did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


class Deleted(Enum):
    """What `Pass.delete` came to."""

    GONE = "gone"
    """Deleted (or deleting through its grace period)."""
    HELD = "held"
    """Finalizers hold it: it is being deleted, and still there."""
    ABSENT = "absent"
    """It was gone already."""


def field_drift(current: JSONDict, desired: JSONDict) -> list[str]:
    """The fields `desired` sets that `current` holds otherwise: each top-level field but the
    type and status (of an object field such as `spec`, each key `desired` names), and the
    labels and annotations `desired` names. Keys someone else added do not count: a merge
    patch keeps them."""
    drifted: list[str] = []
    for key, value in desired.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        held = current.get(key)
        if isinstance(value, dict) and isinstance(held, dict):
            drifted += [f"{key}.{k}" for k, v in value.items() if held.get(k) != v]
        elif held != value:
            drifted.append(key)
    have, want = metadata_of(current), metadata_of(desired)
    for part, held, wanted in (
        ("labels", have.get("labels") or {}, want.get("labels") or {}),
        ("annotations", have.get("annotations") or {}, want.get("annotations") or {}),
    ):
        if any(held.get(k) != v for k, v in wanted.items()):
            drifted.append(f"metadata.{part}")
    return drifted


class Recall:
    """What this process remembers about one object, by uid (module docstring)."""

    def __init__(self, expectations: Expectations, uid: str) -> None:
        self.expected = expectations
        self.uid = uid

    def done(self, step: Step) -> bool:
        return self.expected.noted(self.uid, step) is not None

    def noted(self, step: Step) -> Note | None:
        return self.expected.noted(self.uid, step)

    def note(self, step: Step, value: builtins.object = True) -> None:
        self.expected.note(self.uid, step, value)

    def clear(self, step: Step) -> None:
        self.expected.clear(self.uid, step)

    def do_once(self, step: Step) -> bool:
        """Whether the caller is to do `step` now: True the first time (the step is then noted
        as done), False once it was noted."""
        if self.done(step):
            return False
        self.note(step)
        return True

    def age(self, note: Note) -> float:
        """Seconds since `note` was made."""
        return self.expected.age(note)

    def written_status(self) -> JSONDict:
        """Every status field this process wrote for the object, latest value each."""
        return self.expected.written_status(self.uid)

    def unseen(self, cached: Callable[[str], JSONDict | None]) -> Unseen:
        """The children this process created or deleted that the cache does not show yet,
        given the cache's child of a name (`Expectations.unseen`)."""
        return self.expected.unseen(self.uid, cached)

    def memory(self, cls: type[M]) -> M:
        """The reconciler's typed memory of the object (`cls()` on first use)."""
        return self.expected.memory(self.uid, cls)

    def recalled(self, cls: type[M]) -> M | None:
        """The typed memory if one was made; a wake rule reads with this, never makes one."""
        return self.expected.recalled(self.uid, cls)


class Pass(Recall):
    """One pass over one cached object: its lazy view, key, uid and logger, what this process
    remembers of it (`Recall`), and the writes whose repeat a lagging cache would otherwise
    cause."""

    def __init__(
        self,
        obj: JSONDict,
        *,
        kind: Kind,
        expectations: Expectations,
        objects: Objects,
        logger: logging.Logger,
        events: EventRecorder | None = None,
    ) -> None:
        super().__init__(expectations, uid_of(obj))
        self.lazy = LazyObject(obj, kind=kind)
        self.kind = kind
        self.key = Request.of(obj)
        self.log = PassLogger(logger, {"key": str(self.key), "uid": self.uid})
        self.objects = objects
        self._events = events

    @property
    def object(self) -> JSONDict:
        """The object as this pass last knows it: read it, edit through `mutate()`."""
        return self.lazy.object

    @property
    def copied(self) -> bool:
        return self.lazy.copied

    def mutate(self) -> JSONDict:
        """The copy to edit (`LazyObject.mutate`)."""
        return self.lazy.mutate()

    async def write(self, *, optimistic: bool = False) -> bool:
        """Send the edits (`LazyObject.write`): whether anything was sent."""
        return await self.lazy.write(self.objects, optimistic=optimistic)

    def about(self, uid: str) -> Recall:
        """What this process remembers about another object (a child this pass created or
        acts on), by its uid."""
        return Recall(self.expected, uid)

    # --- status --------------------------------------------------------------------------------

    def status_due(self, desired: JSONDict, *, compare: Collection[str] | None = None) -> bool:
        """Whether `write_status(desired)` would write: the object's status differs from
        `desired` and this is not a repeat of this process's last write behind a lagging cache
        (`compare`: the fields that decide that, all of `desired` by default)."""
        current = status_of(self.object)
        if all(current.get(k) == v for k, v in desired.items()):
            return False
        checked = desired if compare is None else {k: desired[k] for k in compare}
        return not self.expected.status_redundant(self.uid, current=current, desired=checked)

    async def write_status(
        self,
        desired: JSONDict,
        *,
        optimistic: bool = False,
        deep: bool = False,
        compare: Collection[str] | None = None,
    ) -> bool:
        """Write the status fields `desired` with whatever else the lazy view holds, unless
        they are there already or repeat this process's last write (`status_due`); record the
        write. `optimistic` carries the resourceVersion the pass decided on (a concurrent write
        makes it fail with Conflict); `deep` merges nested dicts key by key. Whether it wrote."""
        if not self.status_due(desired, compare=compare):
            return False
        current = status_of(self.object)
        status = self.lazy.mutate().setdefault("status", {})
        if deep:
            deep_merge(status, desired)
        else:
            status.update(desired)
        await self.lazy.write(self.objects, optimistic=optimistic)
        self.expected.wrote_status(self.uid, current=current, desired=desired)
        self.log.info("status written: %s", ", ".join(sorted(desired)))
        return True

    # --- other objects -------------------------------------------------------------------------

    async def delete(self, kind: Kind, target: JSONDict | Request) -> Deleted:
        """Delete an object (one read from the cache, with its uid as a precondition, or a key):
        gone, held by finalizers, or absent already. A child of this pass's object is recorded
        as deleted (`Expectations.unseen` shows it deleting until the cache does). Logged when
        it went; one held is logged at debug (a pass that waits for it asks again)."""
        if isinstance(target, Request):
            namespace, name, uid = target.namespace, target.name, None
        else:
            meta = metadata_of(target)
            namespace, name, uid = meta.get("namespace", ""), meta["name"], meta.get("uid")
            if controller_owner_uid(target) == self.uid:
                self.expected.deleted(self.uid, target)
        try:
            answer = await self.objects.delete(kind, namespace, name, uid=uid)
        except NotFound:
            return Deleted.ABSENT
        if answer is not None and metadata_of(answer).get("finalizers"):
            self.log.debug("deleting %s %s/%s: its finalizers hold it", kind.kind, namespace, name)
            return Deleted.HELD
        self.log.info("deleted %s %s/%s", kind.kind, namespace, name)
        return Deleted.GONE

    async def create(
        self, kind: Kind, namespace: str, body: JSONDict, *, unseen: bool = True
    ) -> JSONDict:
        """Create an object and return the server's answer; a child of this pass's object is
        recorded for `unseen` until the cache shows it (`unseen=False`: a child its reconciler
        never lays over the cache). Not logged: the plan the pass logged said it (a set's N
        runners are one line, not N)."""
        created = await self.objects.create(kind, namespace, body)
        if unseen and controller_owner_uid(created) == self.uid:
            self.created(created)
        return created

    async def patch(self, kind: Kind, target: JSONDict, patch: JSONDict) -> JSONDict | None:
        """Merge-patch another object (a child's annotations); None when it is gone."""
        meta = metadata_of(target)
        try:
            return await self.objects.patch(kind, meta.get("namespace", ""), meta["name"], patch)
        except NotFound:
            return None

    async def event(self, reason: str, message: str) -> None:
        """A Normal Event on this pass's object (a step a user should see, not a warning)."""
        assert self._events is not None, "a Pass that posts Events needs Passes(events=)"
        await self._events.normal(self.object, reason=reason, message=message)

    async def delete_self(self) -> JSONDict | None:
        """Delete this pass's object; the object as the answer has it when finalizers hold it,
        for the same pass to finalize (the deletion is an own write: its echo wakes nothing,
        docs/controller-runtime.md#own-writes), else None (gone, or gone already)."""
        meta = metadata_of(self.object)
        try:
            held = await self.objects.delete(
                self.kind, meta["namespace"], meta["name"], uid=meta.get("uid")
            )
        except NotFound:
            return None
        self.log.info("deleted")
        return held

    def created(self, child: JSONDict) -> None:
        """Record a child this pass created (the server's answer) for `unseen`."""
        self.expected.created(self.uid, child)

    async def read(self, kind: Kind, namespace: str, name: str) -> JSONDict | None:
        """An object read from the API (not the cache); None when there is none."""
        try:
            return await self.objects.get(kind, namespace, name)
        except NotFound:
            return None

    async def ensure(
        self,
        kind: Kind,
        desired: JSONDict,
        current: JSONDict | type[_Read] | None = _Read,
        *,
        drift: Callable[[JSONDict, JSONDict], list[str]] = field_drift,
        replace: bool = False,
        optimistic: bool = False,
    ) -> Ensured:
        """Bring the object `desired` describes to it, as controller-runtime's `CreateOrPatch`:
        read it (`current`: the caller's read, from the cache or the API; by default a GET),
        create it when there is none, else write it when `drift(current, desired)` names a
        field: a merge patch of `desired`'s fields, labels and annotations (keys someone else
        added stay), or with `replace` a PUT of `desired` on the resourceVersion read, or with
        `optimistic` the diff from what was read to it (each field `desired` sets replaced, an
        object field key by key) carrying the resourceVersion read, so that a write since makes
        it fail with Conflict. Logs what it did in one line and says it. A create the cache has
        not shown yet (409) counts as unchanged."""
        meta = desired["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        if current is _Read:
            current = await self.read(kind, namespace, name)
        assert current is None or isinstance(current, dict)
        if current is None:
            try:
                await self.objects.create(kind, namespace, desired)
            except AlreadyExists:
                return Ensured.UNCHANGED
            self.log.info("created %s %s/%s", kind.kind, namespace, name)
            return Ensured.CREATED
        drifted = drift(current, desired)
        if not drifted:
            return Ensured.UNCHANGED
        if optimistic:
            lazy = LazyObject(current, kind=kind)
            edit = lazy.mutate()
            for key, value in desired.items():
                if key in ("apiVersion", "kind"):
                    continue
                if key == "metadata":
                    for part in ("labels", "annotations"):
                        if value.get(part):
                            edit["metadata"].setdefault(part, {}).update(value[part])
                elif isinstance(value, dict) and isinstance(edit.get(key), dict):
                    edit[key].update(value)
                else:
                    edit[key] = value
            await lazy.write(self.objects, optimistic=True)
        elif replace:
            body = {**desired, "metadata": {**meta}}
            body["metadata"]["resourceVersion"] = metadata_of(current).get("resourceVersion")
            await self.objects.replace(kind, namespace, body)
        else:
            patch = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind")}
            patch["metadata"] = {
                "labels": meta.get("labels") or {},
                "annotations": meta.get("annotations") or {},
            }
            await self.objects.patch(kind, namespace, name, patch)
        self.log.info("updated %s %s/%s: %s", kind.kind, namespace, name, ", ".join(drifted))
        return Ensured.UPDATED

    # --- warnings ------------------------------------------------------------------------------

    async def warn(
        self,
        reason: str,
        message: str,
        *,
        subject: builtins.object = None,
        also_on: Sequence[JSONDict] = (),
        event: bool = True,
    ) -> bool:
        """Say a condition that needs a human: one warning line, and a Warning Event `reason`
        on this pass's object (and on each of `also_on`, such as the set a user looks at),
        unless it is what this object was last warned of for `reason` and `subject` (a replica,
        a child): a condition every pass meets again is said once, and again when its message
        changes. `settle` when it ends, so a return is said. Whether it warned."""
        step = (_Warned.WARNED, (reason, subject))
        last = self.noted(step)
        if last is not None and last.value == message:
            return False
        self.note(step, message)
        self.log.warning("%s", message, extra={"reason": reason})
        if event:
            assert self._events is not None, "a Pass that posts Events needs Passes(events=)"
            for obj in (self.object, *also_on):
                await self._events.warning(obj, reason=reason, message=message)
        return True

    def settle(self, reason: str, *, subject: builtins.object = None) -> None:
        """The condition `warn` said for `reason` and `subject` ended."""
        self.clear((_Warned.WARNED, (reason, subject)))


class Passes:
    """What every pass of one reconciler shares: its kind's cache, the expectations, the API
    and its logger."""

    def __init__(
        self,
        *,
        kind: Kind,
        store: Store,
        expectations: Expectations,
        objects: Objects,
        logger: logging.Logger,
        events: EventRecorder | None = None,
    ) -> None:
        self.kind = kind
        self._store = store
        self.expected = expectations
        self._objects = objects
        self._logger = logger
        self._events = events

    def begin(self, request: Request) -> Pass | None:
        """The pass over the key's cached object; None once it left the cache, when everything
        the expectations hold about it is forgotten."""
        cached = self._store.get(request.namespace, request.name)
        if cached is None:
            self.forget(request)
            return None
        return self.on(cached)

    def on(self, obj: JSONDict) -> Pass:
        """A pass over `obj` (the cache's copy, or one read from the API), its uid tracked."""
        started = Pass(
            obj,
            kind=self.kind,
            expectations=self.expected,
            objects=self._objects,
            logger=self._logger,
            events=self._events,
        )
        self.expected.track(self.kind, started.key, started.uid)
        return started

    def recall(self, obj: JSONDict) -> Recall:
        """What this process remembers about `obj`, for a wake rule: no pass, nothing tracked."""
        return Recall(self.expected, uid_of(obj))

    def forget(self, request: Request) -> None:
        """The key's object left the cache (a controller's `deleted=`, or a pass finding it
        gone): drop what the expectations hold about it."""
        self.expected.forget(self.kind, request)
