"""The runners of each set, bucketed from the informer's events (controller/ephemeralrunnerset/
children.py): the same buckets as `rules.classify`, at a cost per event instead of per pass."""

from __future__ import annotations

import sys
import tracemalloc
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from controller.ephemeralrunnerset.children import ChildIndex
from controller.ephemeralrunnerset.reconciler import EphemeralRunnerSetReconciler
from controller.ephemeralrunnerset.rules import Children, classify, scale_down_candidates
from controller.runtime import Request
from controller.runtime.expectations import DELETING, Unseen
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions

OWNER = "set-uid"


def runner(
    name: str,
    phase: str = "",
    *,
    owner: str = OWNER,
    patch_id: int | None = 1,
    revision: int = 0,
    deleting: bool = False,
) -> JSONDict:
    annotations = {"actions.github.com/actionable-revision": str(revision)}
    if patch_id is not None:
        annotations["actions.github.com/patch-id"] = str(patch_id)
    meta: JSONDict = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "annotations": annotations,
        "ownerReferences": [{"kind": "EphemeralRunnerSet", "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    return {"metadata": meta, "status": {"phase": phase} if phase else {}}


def buckets(children: Children) -> dict[str, list[str]]:
    fields = ("pending", "running", "finished", "failed", "outdated", "stale_outdated", "deleting")
    named = {f: sorted(r["metadata"]["name"] for r in getattr(children, f)) for f in fields}
    return {**named, "latest": [str(children.latest_patch_id)]}


def test_events_keep_the_buckets_classify_would_give() -> None:
    index = ChildIndex()
    world = {
        "a": runner("a"),
        "b": runner("b", "Running", patch_id=3),
        "c": runner("c", "Succeeded"),
        "d": runner("d", "Failed", patch_id=None),
        "e": runner("e", "Outdated", revision=1),
        "f": runner("f", "Outdated", revision=2),
        "g": runner("g", deleting=True, patch_id=2),
        "other": runner("other", "Running", owner="another-set", patch_id=9),
    }
    for obj in world.values():
        index.on_add(obj)
    moved = runner("a", "Running", patch_id=5)
    index.on_update(world["a"], moved)
    world["a"] = moved
    index.on_delete(world.pop("b"))

    got = index.children(OWNER, applied_revision=2, unseen=Unseen())

    mine = [obj for name, obj in world.items() if name != "other"]
    assert buckets(got) == buckets(classify(mine, applied_revision=2))
    assert got.latest_patch_id == 5


def test_unseen_changes_are_laid_over_the_buckets() -> None:
    index = ChildIndex()
    idle, busy = runner("idle"), runner("busy", "Running")
    index.on_add(idle)
    index.on_add(busy)
    marked = {**idle, "metadata": {**idle["metadata"], "deletionTimestamp": DELETING}}
    created = runner("new", patch_id=7)

    got = index.children(
        OWNER, applied_revision=0, unseen=Unseen(created=[created], deleting=[marked])
    )

    assert buckets(got) == buckets(classify([marked, busy, created], applied_revision=0))
    # The overlay is the pass's own copy: the index still has the runner where the cache does.
    assert buckets(index.children(OWNER, applied_revision=0, unseen=Unseen()))["pending"] == [
        "idle"
    ]


def allocated_by(work: Callable[[], object]) -> int:
    """The most memory `work` held at once beyond what it started with (tracemalloc's peak):
    a copy of a set's runners is a container as large as the set."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        work()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_a_plan_in_a_predicate_copies_nothing_of_the_set_s_size() -> None:
    """During a jobs phase a set always has deletions the cache does not show yet, and its
    delete predicate plans the set on each runner's delete event: each plan copied every bucket
    to lay the deletions over it, O(N) per runner deleted and O(N^2) per phase (7 % of the
    controller's CPU at 10,000 runners). Unpinned, the deletions are counted out instead."""

    def read_with(count: int, *, pinned: bool) -> int:
        index = ChildIndex()
        runners = [runner(f"r{i}", "Running" if i % 2 else "Succeeded") for i in range(count)]
        for obj in runners:
            index.on_add(obj)
        gone = [
            {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": DELETING}}
            for obj in runners[:2]
        ]
        unseen = Unseen(deleting=gone)

        def read() -> None:
            got = index.children(OWNER, applied_revision=0, unseen=unseen, pinned=pinned)
            assert (got.scale_total, len(got.finished), len(got.deleting)) == (
                count // 2 - 1,
                count // 2 - 1,
                2,
            )
            assert sorted(r["metadata"]["name"] for r in got.deleting) == ["r0", "r1"]

        return allocated_by(read)

    # Less than a byte per runner more at 4,000 than at 10 (a copy is 8 bytes a runner or more).
    assert read_with(4000, pinned=False) - read_with(10, pinned=False) < 4000
    # A pass's own copy: the references, 8 bytes a runner (copies of the buckets as dicts were
    # about 45).
    assert read_with(4000, pinned=True) - read_with(10, pinned=True) < 4000 * 9


def calls_in(work: Callable[[], object]) -> int:
    """Python function calls `work` makes."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def test_a_scale_down_reads_the_idle_runners_not_the_busy_ones() -> None:
    """In a jobs phase nearly every runner is busy, and a pass that scales down (the listener's
    count fell before the runners finished) looked at each live runner for a victim: 66 % of the
    controller's CPU in a 20,000-runner jobs phase. The index keeps the idle ones apart."""

    def candidates_with(busy: int) -> tuple[list[str], int]:
        index = ChildIndex()
        for i in range(busy):
            obj = runner(f"busy{i}", "Running")
            obj["status"].update(runnerId=i + 10, jobRequestId=i + 1)
            index.on_add(obj)
        for name, rid in (("idle-a", 1), ("idle-b", 2), ("unregistered", 0)):
            obj = runner(name, "Pending")
            obj["status"].update(runnerId=rid, ready=True)
            index.on_add(obj)
        got: list[str] = []

        def read() -> None:
            children = index.children(OWNER, applied_revision=0, unseen=Unseen())
            got.extend(r["metadata"]["name"] for r in scale_down_candidates(children))

        return got, calls_in(read)

    few, many = candidates_with(10), candidates_with(400)
    assert few[0] == many[0] == ["idle-a", "idle-b"]
    assert few[1] == many[1]


def test_the_idle_runners_follow_their_events_and_unseen_deletions() -> None:
    index = ChildIndex()
    idle = runner("idle", "Pending")
    idle["status"].update(runnerId=1)
    other = runner("other", "Pending")
    other["status"].update(runnerId=2)
    index.on_add(idle)
    index.on_add(other)
    busy = {**idle, "status": {**idle["status"], "phase": "Running", "jobRequestId": 7}}
    index.on_update(idle, busy)
    marked = {**other, "metadata": {**other["metadata"], "deletionTimestamp": DELETING}}

    assert [
        r["metadata"]["name"]
        for r in index.children(OWNER, applied_revision=0, unseen=Unseen()).idle
    ] == ["other"]
    got = index.children(OWNER, applied_revision=0, unseen=Unseen(deleting=[marked]))
    assert (list(got.idle), len(got.idle)) == ([], 0)
    assert buckets(got) == buckets(classify([busy, marked], applied_revision=0))


def test_a_set_without_runners_has_empty_buckets() -> None:
    index = ChildIndex()
    index.on_add(runner("x"))
    index.on_delete(runner("x"))

    assert buckets(index.children(OWNER, applied_revision=0, unseen=Unseen())) == buckets(
        Children()
    )


# --- through the emulator: what one pass reads ----------------------------------------------

ACCESSORS = frozenset(
    {
        "shared/kube/views.py",
        "shared/api/views.py",
        "controller/ephemeralrunnerset/rules.py",
        "controller/runtime/expectations.py",
    }
)


def accessor_calls(reconciler: EphemeralRunnerSetReconciler, request: Request) -> int:
    """Calls into the object accessors and rules during one pass of `request`'s set, which for
    a settled set writes nothing and so runs without giving the event loop away."""
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            path = frame.f_code.co_filename
            if any(path.endswith(suffix) for suffix in ACCESSORS):
                calls[path] += 1

    coro = reconciler.reconcile(request)
    sys.setprofile(profile)
    try:
        coro.send(None)
    except StopIteration:
        pass
    else:
        pytest.fail("a pass of a settled set waited for something")
    finally:
        sys.setprofile(None)
        coro.close()
    return sum(calls.values())


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunnerset",), kubelet=False)


async def test_a_pass_reads_the_same_whatever_the_number_of_runners(rig: Rig) -> None:
    """A set pass classified all its runners: reads grew with N, and over a scale-up of N
    runners (about N/2 passes) the set's passes cost O(N^2), two thirds of the controller's
    CPU at 2,500 runners."""
    for name, replicas in (("small", 5), ("large", 40)):
        await rig.create_runner_set(name=name, replicas=replicas, patch_id=1)
    await rig.count_runners(45)
    await rig.settle(delayed=True)
    [ctrl] = [c for c in rig.manager.controllers if c.name == "ephemeralrunnerset"]
    reconciler = ctrl.reconciler
    assert isinstance(reconciler, EphemeralRunnerSetReconciler)

    small = accessor_calls(reconciler, Request(rig.namespace, "small"))
    large = accessor_calls(reconciler, Request(rig.namespace, "large"))

    assert large == small
