"""Update predicates as projections: the mechanism behind every owned watch's filter.

An update of a child wakes its owner's reconciler only when the part of the child that reconciler
reads has changed. Each predicate is a projection; an update is dropped only when the projections
of the old and the new object are equal, so a field left out of a projection is a field the
owner's reconciler promises not to read. Objects of another kind (or not objects at all) always
pass: a predicate never hides what it does not understand. Create, delete and generic events are
never filtered. A primary watch's predicate (`Controller.predicate`) is no projection but a
reconciler's own rule for updates that change nothing it would do. The projections themselves
live with the reconcilers that read them (`controller/*/predicates.py`;
docs/controller-runtime.md#predicates).

"metadata" in a projection means all of it but `resourceVersion` and `managedFields`, which change
on every write and carry nothing a reconciler decides on; with them, no update would ever drop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

from shared.kube.objects import Kind
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def stable_metadata(obj: JSONDict) -> JSONDict:
    """The object's metadata without the fields that change on every write."""
    return {k: v for k, v in metadata_of(obj).items() if k not in VOLATILE_METADATA}


@dataclass(frozen=True, slots=True)
class ProjectionPredicate:
    """Passes an update unless both objects are of `kind` and project to equal values."""

    name: str
    kind: Kind
    project: Callable[[JSONDict], object]
    judges_cache = False
    """It compares the event's two objects only: what it drops is dropped in a pass too."""

    def _expected(self, obj: object) -> TypeGuard[JSONDict]:
        return (
            isinstance(obj, dict)
            and obj.get("kind") == self.kind.kind
            and obj.get("apiVersion") == self.kind.api_version
        )

    def update(self, old: object, new: object) -> bool:
        if self._expected(old) and self._expected(new):
            return self.project(old) != self.project(new)
        return True


@dataclass(frozen=True, slots=True)
class RulePredicate:
    """Passes an update unless the reconciler's rule `wakes(old, new)` says it changes nothing
    the reconciler would do (a primary watch's predicate: `Controller.predicate`)."""

    name: str
    wakes: Callable[[JSONDict, JSONDict], bool]
    judges_cache = True
    """The rule reads the caches after the event: a pass running on the key decided on what
    it read before, so the runtime lets the update through then (the in-pass guard)."""

    def update(self, old: object, new: object) -> bool:
        if isinstance(old, dict) and isinstance(new, dict):
            return self.wakes(old, new)
        return True
