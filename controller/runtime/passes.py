"""One reconcile pass over one object (docs/controller-runtime.md#the-pass-object).

Every reconciler starts its pass the same way: read the key from the cache, remember which uid
it holds (so `Expectations.forget` can drop it once it is gone), and then, all through the pass,
ask the expectations about that uid before acting. `Passes` does the start, `Pass` carries the
rest:

    passes = Passes(kind=EPHEMERAL_RUNNER_SET, store=sets, expectations=expected,
                    objects=objects, logger=log)

    async def reconcile(self, request):
        p = passes.begin(request)      # None: gone from the cache, and forgotten
        if p is None:
            return Result()
        ...
        await p.write_status({"phase": "Running"})   # skipped when redundant; recorded
        if not p.done(Step.MARKER):
            ...
            p.note(Step.MARKER)

Steps are members of an `Enum` of the reconciler (or `(member, detail)` for a step repeated per
child, such as a pod uid), never free strings: a misspelt step is a type error, not a step that
never matches.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import Callable, Collection, MutableMapping
from enum import Enum
from typing import Any, TypeAlias

from controller.runtime.cache import Store, controller_owner_uid
from controller.runtime.expectations import Expectations, Note, Unseen
from controller.runtime.lazy import LazyObject
from controller.runtime.reconcile import Request
from shared.kube.errors import AlreadyExists, NotFound
from shared.kube.objects import Kind, Objects
from shared.kube.views import metadata_of, status_of
from shared.typedefs import JSONDict

Step: TypeAlias = Enum | tuple[Enum, builtins.object]
"""An expectations step: a member of the reconciler's own `Enum`, alone or with a detail."""


class _Warned(Enum):
    WARNED = "warned"


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


class Pass:
    """One pass over one cached object: its lazy view, key, uid and logger, and the writes whose
    repeat a lagging cache would otherwise cause, answered from the expectations."""

    def __init__(
        self,
        obj: JSONDict,
        *,
        kind: Kind,
        expectations: Expectations,
        objects: Objects,
        logger: logging.Logger,
    ) -> None:
        self.lazy = LazyObject(obj, kind=kind)
        self.kind = kind
        self.key = Request.of(obj)
        self.uid = str(metadata_of(obj)["uid"])
        self.log = PassLogger(logger, {"key": str(self.key), "uid": self.uid})
        self.expected = expectations
        self.objects = objects

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

    # --- once-steps ----------------------------------------------------------------------------

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

    def written_status(self) -> JSONDict:
        """Every status field this process wrote for the object, latest value each."""
        return self.expected.written_status(self.uid)

    # --- other objects -------------------------------------------------------------------------

    async def delete(self, kind: Kind, target: JSONDict | Request) -> bool:
        """Delete an object (one read from the cache, with its uid as a precondition, or a key);
        False when it was gone already. A child of this pass's object is recorded as deleted
        (`Expectations.unseen` shows it deleting until the cache does)."""
        if isinstance(target, Request):
            namespace, name, uid = target.namespace, target.name, None
        else:
            meta = metadata_of(target)
            namespace, name, uid = meta.get("namespace", ""), meta["name"], meta.get("uid")
            if controller_owner_uid(target) == self.uid:
                self.expected.deleted(self.uid, target)
        try:
            await self.objects.delete(kind, namespace, name, uid=uid)
        except NotFound:
            return False
        self.log.info("deleted %s %s/%s", kind.kind, namespace, name)
        return True

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

    def unseen(self, cached: Callable[[str], JSONDict | None]) -> Unseen:
        """The children this process created or deleted that the cache does not show yet,
        given the cache's child of a name (`Expectations.unseen`)."""
        return self.expected.unseen(self.uid, cached)

    async def create_or_patch(
        self, kind: Kind, desired: JSONDict, current: JSONDict | None
    ) -> JSONDict | None:
        """Create `desired` when `current` (the caller's read of it) is None, a create the
        cache has not shown yet counting as done (None); else merge-patch it with `desired`'s
        fields, labels and annotations (keys someone else added stay). The server's answer."""
        meta = desired["metadata"]
        if current is None:
            with contextlib.suppress(AlreadyExists):
                created = await self.objects.create(kind, meta["namespace"], desired)
                self.log.info("created %s %s/%s", kind.kind, meta["namespace"], meta["name"])
                return created
            return None
        patch = {key: value for key, value in desired.items() if key not in ("apiVersion", "kind")}
        patch["metadata"] = {
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
        }
        patched = await self.objects.patch(kind, meta["namespace"], meta["name"], patch)
        self.log.info("patched %s %s/%s", kind.kind, meta["namespace"], meta["name"])
        return patched

    # --- logging -------------------------------------------------------------------------------

    def warn_once(self, reason: str, message: str, *args: builtins.object) -> None:
        """Log a warning the first time this object meets `reason` (until it leaves the
        cache): a condition every pass meets again is one line, not one per pass."""
        if self.do_once((_Warned.WARNED, reason)):
            self.log.warning(message, *args)


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
    ) -> None:
        self.kind = kind
        self._store = store
        self.expected = expectations
        self._objects = objects
        self._logger = logger

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
        )
        self.expected.track(self.kind, started.key, started.uid)
        return started

    def forget(self, request: Request) -> None:
        """The key's object left the cache (a controller's `deleted=`, or a pass finding it
        gone): drop what the expectations hold about it."""
        self.expected.forget(self.kind, request)
