"""Each set's runners, kept bucketed as the EphemeralRunner informer delivers them.

A set's pass used to classify all its children (`rules.classify`): O(N) per pass, and as a
set of N runners makes about N/2 passes while it scales, O(N^2) in all; at 2,500 runners it was
two thirds of the controller's CPU (BENCHMARKS.md, "Controller memory"). The index is an event
handler of the informer instead: each runner event moves one runner between buckets, and a pass
takes its set's buckets as `Runners`, with what the cache does not show yet laid over them
without reading the rest (docs/reconcilers.md#ephemeralrunnerset).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from controller.ephemeralrunnerset.rules import (
    BUCKETS,
    DELETING,
    FAILED,
    FINISHED,
    IDLE,
    OUTDATED,
    PENDING,
    RUNNING,
    STALE_OUTDATED,
    Children,
    bucket_of,
    classify,
    is_idle,
    is_stale,
    patch_id_of,
)
from controller.runtime import Request
from controller.runtime.expectations import Unseen
from shared.kube.views import controller_owner_uid
from shared.typedefs import JSONDict


class Runners(Collection[JSONDict]):
    """One bucket as a plan reads it: the bucket's runners (the index's own, or a copy of their
    references a pass keeps through its awaits: no runner is read either way), less those the
    set deleted and the cache does not show yet (counted out, skipped when iterated), plus
    `extra`.

    Laying the deletions over copies of the buckets cost a copy of every bucket per call, and
    the set's delete predicate plans on each runner's delete event, when a set always has
    unseen deletions: O(N) per runner deleted and O(N^2) per jobs phase (7 % of the
    controller's CPU at 10,000 runners: BENCHMARKS.md, "Controller memory with the cache
    transform"). A plan iterates few buckets; the rules read the others' lengths.
    """

    __slots__ = ("_extra", "_gone", "_runners")

    def __init__(
        self,
        runners: Collection[JSONDict] = (),
        *,
        gone: frozenset[int] = frozenset(),
        extra: Iterable[JSONDict] = (),
    ) -> None:
        self._runners = runners
        self._gone = gone
        """The `id` of each runner of `runners` counted out: the same objects, so that no
        runner is read to tell."""
        self._extra = list(extra)

    def __len__(self) -> int:
        return len(self._runners) - len(self._gone) + len(self._extra)

    def __iter__(self) -> Iterator[JSONDict]:
        if self._gone:
            yield from (r for r in self._runners if id(r) not in self._gone)
        else:
            yield from self._runners
        yield from self._extra

    def __contains__(self, item: object) -> bool:
        return any(r is item or r == item for r in self)

    def __repr__(self) -> str:
        return f"Runners({list(self)!r})"


@dataclass(slots=True)
class _Owned:
    buckets: dict[str, dict[Request, JSONDict]] = field(
        default_factory=lambda: {bucket: {} for bucket in (*BUCKETS, IDLE)}
    )
    """Per bucket, its runners in the order they entered it; `IDLE` holds those of the pending
    and running buckets a scale-down may take (`rules.is_idle`) too."""
    patch_ids: Counter[int] = field(default_factory=Counter)
    """How many runners carry each patch-id annotation."""


@dataclass(frozen=True, slots=True)
class _Place:
    owner: str
    bucket: str
    patch_id: int | None
    idle: bool


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
        place = None
        if owner is not None:
            bucket = bucket_of(runner)
            place = _Place(owner, bucket, patch_id_of(runner), is_idle(runner, bucket))
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
            buckets = self._owners[place.owner].buckets
            buckets[place.bucket][key] = runner
            if place.idle:
                buckets[IDLE][key] = runner

    def _drop(self, key: Request) -> None:
        place = self._places.pop(key, None)
        if place is None:
            return
        owned = self._owners[place.owner]
        del owned.buckets[place.bucket][key]
        if place.idle:
            del owned.buckets[IDLE][key]
        if place.patch_id is not None:
            owned.patch_ids[place.patch_id] -= 1
            if not owned.patch_ids[place.patch_id]:
                del owned.patch_ids[place.patch_id]
        if not any(owned.buckets.values()):
            del self._owners[place.owner]

    def children(
        self, owner_uid: str, *, applied_revision: int, unseen: Unseen, pinned: bool = True
    ) -> Children:
        """The set's runners as `rules.classify` would bucket the cached ones with `unseen`
        laid over them: its expected deletions moved to `deleting`, its creations added. No
        cached runner is read but the `outdated` ones (split into stale or not).

        `pinned`: each bucket is a copy of its references, as a pass needs across its awaits;
        otherwise the buckets are the index's own, to be read before the next event is handled
        (a predicate's plan), and nothing of the set's size is copied."""
        owned = self._owners.get(owner_uid)
        buckets = owned.buckets if owned is not None else {}
        gone: dict[str, set[int]] = {}
        deleting: dict[Request, JSONDict] = {}
        for runner in unseen.deleting:
            key = Request.of(runner)
            place = self._places.get(key)
            if place is not None and place.owner == owner_uid:
                counted_out = id(buckets[place.bucket][key])
                gone.setdefault(place.bucket, set()).add(counted_out)
                if place.idle:
                    gone.setdefault(IDLE, set()).add(counted_out)
            deleting[key] = runner
        created = classify(unseen.created, applied_revision=applied_revision)
        extra: dict[str, Collection[JSONDict]] = {
            bucket: getattr(created, bucket) for bucket in (*BUCKETS, STALE_OUTDATED, IDLE)
        }
        extra[DELETING] = [*deleting.values(), *created.deleting]

        def view(bucket: str) -> Runners:
            runners = buckets.get(bucket, {}).values()
            return Runners(
                list(runners) if pinned else runners,
                gone=frozenset(gone.get(bucket, ())),
                extra=extra[bucket],
            )

        outdated: list[JSONDict] = []
        stale: list[JSONDict] = []
        for runner in view(OUTDATED):
            stale_one = is_stale(runner, applied_revision=applied_revision)
            (stale if stale_one else outdated).append(runner)
        children = Children(
            pending=view(PENDING),
            running=view(RUNNING),
            finished=view(FINISHED),
            failed=view(FAILED),
            outdated=outdated,
            stale_outdated=[*stale, *extra[STALE_OUTDATED]],
            deleting=view(DELETING),
            latest_patch_id=created.latest_patch_id,
            idle=view(IDLE),
        )
        if owned is not None and owned.patch_ids:
            children.latest_patch_id = max(children.latest_patch_id, max(owned.patch_ids))
        return children
