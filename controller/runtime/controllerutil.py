"""Helpers every reconciler needs on the objects it owns (controller-runtime's controllerutil):
finalizers added and removed in one write, and the controller owner reference."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from controller.runtime.lazy import LazyObject
from shared.kube.errors import NotFound
from shared.kube.objects import Objects
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict, RawOwnerReference


def finalizers_of(obj: JSONDict) -> list[str]:
    return list(metadata_of(obj).get("finalizers") or [])


def has_any_finalizer(obj: JSONDict, names: Sequence[str]) -> bool:
    return bool(set(names) & set(finalizers_of(obj)))


async def add_finalizers(obj: LazyObject, objects: Objects, names: Sequence[str]) -> bool:
    """Add the missing `names` in one write carrying the resourceVersion (a concurrent writer
    makes it fail with Conflict); whether anything was written."""
    current = finalizers_of(obj.object)
    missing = [f for f in names if f not in current]
    if not missing:
        return False
    obj.mutate()["metadata"]["finalizers"] = [*current, *missing]
    return await obj.write(objects, optimistic=True)


async def remove_finalizers(obj: LazyObject, objects: Objects, names: Sequence[str]) -> bool:
    """Remove `names` in one write carrying the resourceVersion; an object already gone counts
    as done. Whether anything was written."""
    current = finalizers_of(obj.object)
    kept = [f for f in current if f not in names]
    if len(kept) == len(current):
        return False
    obj.mutate()["metadata"]["finalizers"] = kept
    with contextlib.suppress(NotFound):
        return await obj.write(objects, optimistic=True)
    return True


def controller_reference(owner: JSONDict) -> RawOwnerReference:
    """The ownerReference making `owner` the controller of another object; with
    blockOwnerDeletion, foreground deletion of the owner waits for the child."""
    meta = metadata_of(owner)
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
