"""Each set's runners, kept bucketed as the EphemeralRunner informer delivers them.

A set's pass used to classify all its children (`rules.classify`): O(N) per pass, and as a
set of N runners makes about N/2 passes while it scales, O(N^2) in all; at 2,500 runners it was
two thirds of the controller's CPU (BENCHMARKS.md, "Controller memory"). The index is an event
handler of the informer instead: each runner event moves one runner between buckets, and a pass
copies its set's buckets as lists (docs/reconcilers.md#ephemeralrunnerset).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.ephemeralrunnerset.rules import (
    BUCKETS,
    DELETING,
    FAILED,
    FINISHED,
    OUTDATED,
    PENDING,
    RUNNING,
    Children,
    bucket_of,
    classify,
    is_stale,
    patch_id_of,
)
from controller.runtime import Request
from controller.runtime.expectations import Unseen
from shared.kube.views import controller_owner_uid
from shared.typedefs import JSONDict


@dataclass(slots=True)
class _Owned:
    buckets: dict[str, dict[Request, JSONDict]] = field(
        default_factory=lambda: {bucket: {} for bucket in BUCKETS}
    )
    """Per bucket, its runners in the order they entered it."""
    patch_ids: Counter[int] = field(default_factory=Counter)
    """How many runners carry each patch-id annotation."""


@dataclass(frozen=True, slots=True)
class _Place:
    owner: str
    bucket: str
    patch_id: int | None


class ChildIndex:
    """An informer event handler: the runners of each set by `rules.BUCKETS`.

    `scanned` counts the runners bucketed, one per event (for tests: a pass adds none).
    `observed(owner_uid, name)` is told of every runner added, so that a runner its set created
    is no longer expected once the cache has shown it (`Expectations.observed`)."""

    def __init__(self, observed: Callable[[str, str], None] | None = None) -> None:
        self._owners: dict[str, _Owned] = {}
        self._places: dict[Request, _Place] = {}
        self._observed = observed
        self.scanned = 0

    def __contains__(self, key: Request) -> bool:
        """Whether the index holds the runner of `key`."""
        return key in self._places

    def on_add(self, obj: JSONDict) -> None:
        owner = controller_owner_uid(obj)
        if self._observed is not None and owner is not None:
            self._observed(owner, str(obj["metadata"]["name"]))
        self._put(obj)

    def on_update(self, old: JSONDict, new: JSONDict) -> None:
        self._put(new)

    def on_delete(self, obj: JSONDict) -> None:
        self._drop(Request.of(obj))

    def _put(self, runner: JSONDict) -> None:
        self.scanned += 1
        key = Request.of(runner)
        owner = controller_owner_uid(runner)
        place = _Place(owner, bucket_of(runner), patch_id_of(runner)) if owner is not None else None
        if place != self._places.get(key):
            self._drop(key)
            if place is None:
                return
            owned = self._owners.setdefault(place.owner, _Owned())
            if place.patch_id is not None:
                owned.patch_ids[place.patch_id] += 1
            self._places[key] = place
        if place is not None:
            # An update within the bucket keeps the runner's position in it.
            self._owners[place.owner].buckets[place.bucket][key] = runner

    def _drop(self, key: Request) -> None:
        place = self._places.pop(key, None)
        if place is None:
            return
        owned = self._owners[place.owner]
        del owned.buckets[place.bucket][key]
        if place.patch_id is not None:
            owned.patch_ids[place.patch_id] -= 1
            if not owned.patch_ids[place.patch_id]:
                del owned.patch_ids[place.patch_id]
        if not any(owned.buckets.values()):
            del self._owners[place.owner]

    def children(self, owner_uid: str, *, applied_revision: int, unseen: Unseen) -> Children:
        """The set's runners as `rules.classify` would bucket the cached ones with `unseen`
        laid over them: its expected deletions moved to `deleting`, its creations added."""
        owned = self._owners.get(owner_uid)
        buckets = owned.buckets if owned is not None else {b: {} for b in BUCKETS}
        if unseen.deleting:
            buckets = {bucket: dict(runners) for bucket, runners in buckets.items()}
            for runner in unseen.deleting:
                key = Request.of(runner)
                place = self._places.get(key)
                if place is not None and place.owner == owner_uid:
                    del buckets[place.bucket][key]
                buckets[DELETING][key] = runner
        children = Children(
            pending=list(buckets[PENDING].values()),
            running=list(buckets[RUNNING].values()),
            finished=list(buckets[FINISHED].values()),
            failed=list(buckets[FAILED].values()),
            deleting=list(buckets[DELETING].values()),
        )
        for runner in buckets[OUTDATED].values():
            stale = is_stale(runner, applied_revision=applied_revision)
            (children.stale_outdated if stale else children.outdated).append(runner)
        if owned is not None and owned.patch_ids:
            children.latest_patch_id = max(owned.patch_ids)
        if unseen.created:
            created = classify(unseen.created, applied_revision=applied_revision)
            children.latest_patch_id = max(children.latest_patch_id, created.latest_patch_id)
            for bucket in (*BUCKETS, "stale_outdated"):
                getattr(children, bucket).extend(getattr(created, bucket))
        return children
