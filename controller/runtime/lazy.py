"""Lazy copies: a reconcile that changes nothing copies nothing
(docs/controller-runtime.md#lazy-copies).

`LazyObject` wraps an object read from the cache. Until `mutate()` is called, `.object` is the
cached dict itself and must only be read. The first `mutate()` deep-copies it and returns the
copy, which the reconciler edits freely; the untouched original is the snapshot the merge patch
is computed against. The cache's dict is therefore never edited, so a failed write leaves no
unsent change behind for other workers to read, and no mutation can precede the snapshot.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextvars import ContextVar

from shared.kube import mergepatch
from shared.kube.objects import Kind, Objects
from shared.typedefs import JSONDict

# The worker running a reconcile sets this, so copies are counted per controller without the
# reconciler passing anything along.
copy_observer: ContextVar[Callable[[], None] | None] = ContextVar("copy_observer", default=None)


class LazyObject:
    def __init__(self, obj: JSONDict, *, kind: Kind) -> None:
        self.kind = kind
        self._original = obj
        self._live: JSONDict | None = None

    @property
    def object(self) -> JSONDict:
        """The current state: the mutated copy once `mutate()` was called, else the original."""
        return self._live if self._live is not None else self._original

    @property
    def copied(self) -> bool:
        return self._live is not None

    def mutate(self) -> JSONDict:
        """The object to edit; the first call takes the snapshot."""
        if self._live is None:
            self._live = copy.deepcopy(self._original)
            observer = copy_observer.get()
            if observer is not None:
                observer()
        return self._live

    def patch(self) -> JSONDict:
        """The merge patch from the snapshot to the edited object (empty without edits)."""
        if self._live is None:
            return {}
        return mergepatch.diff(self._original, self._live)

    async def write(self, objects: Objects, *, optimistic: bool = False) -> bool:
        """Send the changes: one merge patch for the object, one for `/status`, each only when
        it changed. With `optimistic`, each patch carries the snapshot's resourceVersion, so a
        concurrent write makes it fail with `Conflict`. Returns whether anything was sent.

        Afterwards the server's answer becomes the new original, and the next `mutate()` copies
        again.
        """
        main, status = mergepatch.split_status(self.patch())
        if not main and not status:
            return False
        meta = self._original.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta["name"]
        result = self._original
        for body, is_status in ((main, False), (status, True)):
            if not body:
                continue
            if optimistic:
                rv = (result.get("metadata") or {}).get("resourceVersion")
                body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": rv}}
            result = await objects.patch(self.kind, namespace, name, body, status=is_status)
        self._original = result
        self._live = None
        return True
