"""The informer's transform: what the store keeps of each object, shared where equal, and a
re-list that keeps what it already holds."""

from __future__ import annotations

import gc

from controller.runtime import Informer, WatchSettings
from controller.runtime.cache import Subtrees, Transform, merge
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import POD, Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import eventually, runner_body
from tests.controller.runtime.test_informer import FAST, converge, running

STATUS = {"phase": "Running", "podIP": "10.1.0.7", "conditions": [{"type": "Ready", "x": 1}]}


def test_a_narrowed_field_keeps_only_its_shape_and_whole_wins_a_merge() -> None:
    transform = Transform(POD)
    transform.reads(("status",))
    transform.narrow("status", {"phase": None})
    transform.narrow("status", {"conditions": {"type": None}})
    pod: JSONDict = {"metadata": {"name": "p", "managedFields": [{}]}, "spec": {}, "status": STATUS}
    assert transform(pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
    }
    assert merge({"a": {"b": None}}, {"a": None, "c": {}}) == {"a": None, "c": {}}


def test_equal_labels_and_specs_are_one_object_and_go_with_their_last_holder() -> None:
    transform = Transform(EPHEMERAL_RUNNER)
    first = transform(runner_body("a", labels={"team": "a"}))
    second = transform(runner_body("b", labels={"team": "a"}))
    other = transform(runner_body("c", labels={"team": "c"}))
    assert first["spec"] is second["spec"] is other["spec"]
    assert first["metadata"]["labels"] is second["metadata"]["labels"]
    assert other["metadata"]["labels"] == {"team": "c"}
    assert len(transform.subtrees) == 3
    del other
    gc.collect()
    transform.subtrees.sweep()
    assert len(transform.subtrees) == 2
    del first, second
    transform.subtrees.sweep()
    assert len(transform.subtrees) == 0


def test_the_table_sweeps_itself_as_it_grows() -> None:
    subtrees = Subtrees()
    for i in range(10 * Subtrees.MIN_SWEEP):
        subtrees.share({"metadata": {"labels": {"i": str(i)}}})
    assert len(subtrees) <= Subtrees.MIN_SWEEP


async def test_watched_objects_share_what_listed_ones_hold(objects: Objects, ns: str) -> None:
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("listed", labels={"team": "a"}))
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body("watched", labels={"team": "a"}))

        async def watched() -> bool:
            return informer.store.get(ns, "watched") is not None

        await eventually(watched)
        listed, seen = informer.store.get(ns, "listed"), informer.store.get(ns, "watched")
        assert listed is not None
        assert seen is not None
        assert listed["spec"] is seen["spec"]
        assert listed["metadata"]["labels"] is seen["metadata"]["labels"]


async def test_a_relist_keeps_the_objects_it_holds_at_the_same_version(
    kube: KubeEmulator, objects: Objects, ns: str
) -> None:
    for i in range(5):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body(f"r-{i}"))
    settings = WatchSettings(
        page_size=2, inactivity_timeout=1.0, request_timeout=5.0, retry_base=0.05, retry_max=0.2
    )
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=settings)
    async with running(informer):
        before = {o["metadata"]["name"]: o for o in informer.store}
        lists = informer.lists
        await objects.patch(EPHEMERAL_RUNNER, ns, "r-0", {"metadata": {"labels": {"x": "y"}}})
        kube.faults.force_gone()
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r-5"))
        await converge(informer, objects, ns)
        assert informer.lists == lists + 1
        after = {o["metadata"]["name"]: o for o in informer.store}
    assert [name for name in before if after[name] is not before[name]] == ["r-0"]
    assert after["r-0"]["metadata"]["labels"] == {"x": "y"}
