"""The pass object on the emulator: a pass starts from the cache and tracks the uid, writes a
status once however stale the cache, deletes ignoring NotFound, and says a warning once."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

import pytest

from controller.runtime import EventRecorder, Expectations, Pass, Passes, Request, Store
from controller.runtime.expectations import DELETING
from controller.runtime.passes import Deleted, Ensured, field_drift
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.errors import Conflict
from shared.kube.objects import EVENT, POD, SECRET, Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import runner_body

log = logging.getLogger("tests.passes")


class Step(Enum):
    MARKED = "marked"


@pytest.fixture
def store() -> Store:
    return Store(EPHEMERAL_RUNNER)


@pytest.fixture
def expected() -> Expectations:
    return Expectations()


@pytest.fixture
def passes(store: Store, expected: Expectations, objects: Objects) -> Passes:
    return Passes(
        kind=EPHEMERAL_RUNNER, store=store, expectations=expected, objects=objects, logger=log
    )


@pytest.fixture
async def runner(objects: Objects, ns: str, store: Store) -> JSONDict:
    created = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    store.upsert(created)
    return created


def begin(passes: Passes, ns: str) -> Pass:
    started = passes.begin(Request(ns, "r"))
    assert started is not None
    return started


async def test_a_pass_carries_key_uid_and_forgets_once_the_object_left_the_cache(
    passes: Passes, store: Store, ns: str, runner: JSONDict
) -> None:
    p = begin(passes, ns)
    assert (p.key, p.uid) == (Request(ns, "r"), runner["metadata"]["uid"])
    p.note(Step.MARKED)
    assert begin(passes, ns).done(Step.MARKED)
    store.remove(Request(ns, "r"))
    assert passes.begin(Request(ns, "r")) is None
    store.upsert(runner)
    assert not begin(passes, ns).done(Step.MARKED)


async def test_do_once_is_true_the_first_time_only(
    passes: Passes, ns: str, runner: JSONDict
) -> None:
    assert begin(passes, ns).do_once(Step.MARKED)
    assert not begin(passes, ns).do_once(Step.MARKED)
    assert begin(passes, ns).do_once((Step.MARKED, "another child"))


async def test_a_status_write_is_not_repeated_behind_a_stale_cache(
    kube: KubeEmulator, objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    kube.requests.reset()
    assert await begin(passes, ns).write_status({"phase": "Running"})
    # The store still holds the object without the status: the next pass reads that.
    assert not await begin(passes, ns).write_status({"phase": "Running"})
    assert kube.requests.count(verb="patch", subresource="status") == 1
    server = await objects.get(EPHEMERAL_RUNNER, ns, "r")
    assert server["status"]["phase"] == "Running"
    assert begin(passes, ns).written_status() == {"phase": "Running"}


async def test_a_status_already_shown_is_not_written(
    kube: KubeEmulator, objects: Objects, store: Store, passes: Passes, ns: str, runner: JSONDict
) -> None:
    store.upsert(
        await objects.patch(
            EPHEMERAL_RUNNER, ns, "r", {"status": {"phase": "Pending"}}, status=True
        )
    )
    kube.requests.reset()
    assert not await begin(passes, ns).write_status({"phase": "Pending"})
    assert kube.requests.count() == 0


async def test_a_status_someone_else_changed_is_written_again(
    objects: Objects, store: Store, passes: Passes, ns: str, runner: JSONDict
) -> None:
    assert await begin(passes, ns).write_status({"phase": "Running"})
    store.upsert(
        await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"status": {"phase": "Failed"}}, status=True)
    )
    assert await begin(passes, ns).write_status({"phase": "Running"})
    assert (await objects.get(EPHEMERAL_RUNNER, ns, "r"))["status"]["phase"] == "Running"


async def test_delete_ignores_not_found_and_records_a_child(
    objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    p = begin(passes, ns)
    child = await objects.create(
        SECRET,
        ns,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "child",
                "ownerReferences": [
                    {
                        "apiVersion": runner["apiVersion"],
                        "kind": runner["kind"],
                        "name": "r",
                        "uid": p.uid,
                        "controller": True,
                    }
                ],
            },
        },
    )
    assert await p.delete(SECRET, child)
    assert await p.delete(SECRET, child) is Deleted.ABSENT
    assert await p.delete(POD, Request(ns, "never-made")) is Deleted.ABSENT
    unseen = p.unseen(lambda name: child if name == "child" else None)
    assert [c["metadata"]["deletionTimestamp"] for c in unseen.deleting] == [DELETING]


async def test_a_child_created_is_unseen_until_the_cache_shows_it(
    objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    p = begin(passes, ns)
    child = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("child"))
    p.created(child)
    assert begin(passes, ns).unseen(lambda name: None).created == [child]
    assert begin(passes, ns).unseen(lambda name: child).created == []


def secret(ns: str, **labels: str) -> JSONDict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": ns, "labels": dict(labels)},
        "data": {"k": "dg=="},
    }


async def test_ensure_creates_then_leaves_alone_then_patches_keeping_foreign_labels(
    objects: Objects, passes: Passes, ns: str, runner: JSONDict, kube: KubeEmulator
) -> None:
    p = begin(passes, ns)
    desired = secret(ns, mine="1")
    assert await p.ensure(SECRET, desired) is Ensured.CREATED
    # A create the cache has not shown yet: the caller read nothing, the server has it.
    assert await p.ensure(SECRET, desired, None) is Ensured.UNCHANGED
    before = len(kube.requests.log)
    assert await p.ensure(SECRET, desired) is Ensured.UNCHANGED
    assert [r.verb for r in kube.requests.log[before:]] == ["get"]
    await objects.patch(SECRET, ns, "s", {"metadata": {"labels": {"theirs": "1"}}})
    assert await p.ensure(SECRET, secret(ns, mine="2")) is Ensured.UPDATED
    assert (await objects.get(SECRET, ns, "s"))["metadata"]["labels"] == {
        "mine": "2",
        "theirs": "1",
    }


async def test_ensure_replaces_on_the_resource_version_read_and_says_what_drifted(
    caplog: pytest.LogCaptureFixture, objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    p = begin(passes, ns)
    await p.ensure(SECRET, secret(ns))
    current = await objects.get(SECRET, ns, "s")
    changed = {**secret(ns), "data": {"k": "dw=="}}
    with caplog.at_level(logging.INFO, logger=log.name):
        assert await p.ensure(SECRET, changed, current, replace=True) is Ensured.UPDATED
    assert caplog.records[-1].getMessage() == f"{ns}/r: updated Secret {ns}/s: data.k"
    # A replace carries what it read: a write since makes it fail, not overwrite.
    with pytest.raises(Conflict):
        await p.ensure(SECRET, {**secret(ns), "data": {"k": "eA=="}}, current, replace=True)


async def test_a_warning_is_said_once_per_message_with_an_event_until_settled(
    caplog: pytest.LogCaptureFixture,
    objects: Objects,
    store: Store,
    expected: Expectations,
    ns: str,
    runner: JSONDict,
) -> None:
    passes = Passes(
        kind=EPHEMERAL_RUNNER,
        store=store,
        expectations=expected,
        objects=objects,
        logger=log,
        events=EventRecorder(objects=objects, component="test"),
    )
    with caplog.at_level(logging.WARNING, logger=log.name):
        said = [await begin(passes, ns).warn("Refused", "refused: why") for _ in range(3)]
        assert said == [True, False, False]
        await begin(passes, ns).warn("Refused", "refused: why", subject=1)
        await begin(passes, ns).warn("Refused", "refused: another reason")
        begin(passes, ns).settle("Refused")
        await begin(passes, ns).warn("Refused", "refused: another reason")
        await begin(passes, ns).warn("Quiet", "only logged", event=False)
    assert [r.getMessage() for r in caplog.records] == [
        f"{ns}/r: refused: why",
        f"{ns}/r: refused: why",
        f"{ns}/r: refused: another reason",
        f"{ns}/r: refused: another reason",
        f"{ns}/r: only logged",
    ]
    record = caplog.records[0]
    assert (record.__dict__["key"], record.__dict__["uid"], record.__dict__["reason"]) == (
        f"{ns}/r",
        runner["metadata"]["uid"],
        "Refused",
    )
    events = (await objects.list(EVENT, ns))["items"]
    assert sorted(e["message"] for e in events) == [
        "refused: another reason",
        "refused: another reason",
        "refused: why",
        "refused: why",
    ]


@dataclass
class Restarts:
    count: int = 0


async def test_a_typed_memory_lives_as_long_as_its_object(
    passes: Passes, store: Store, ns: str, runner: JSONDict
) -> None:
    assert passes.recall(runner).recalled(Restarts) is None
    begin(passes, ns).memory(Restarts).count += 1
    begin(passes, ns).memory(Restarts).count += 1
    assert passes.recall(runner).recalled(Restarts) == Restarts(2)
    store.remove(Request(ns, "r"))
    assert passes.begin(Request(ns, "r")) is None
    assert passes.recall(runner).recalled(Restarts) is None


async def test_delete_self_answers_the_object_its_finalizers_hold_and_none_once_gone(
    objects: Objects, ns: str, store: Store, expected: Expectations
) -> None:
    """The pass that deletes its own object gets the copy to finalize with (its resourceVersion
    is the one a finalizer removal must carry); a second delete finds it gone."""
    held_body = {**runner_body("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}}
    store.upsert(await objects.create(EPHEMERAL_RUNNER, ns, held_body))
    passes = Passes(
        kind=EPHEMERAL_RUNNER, store=store, expectations=expected, objects=objects, logger=log
    )
    p = passes.begin(Request(ns, "held"))
    assert p is not None
    held = await p.delete_self()
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["x/y"]
    await objects.patch(
        EPHEMERAL_RUNNER,
        ns,
        "held",
        {"metadata": {"finalizers": None, "resourceVersion": held["metadata"]["resourceVersion"]}},
    )
    assert await p.delete_self() is None


@pytest.mark.parametrize(
    ("current", "desired", "drift"),
    [
        ({"spec": {"replicas": 3, "patchID": 0}}, {"replicas": 0, "patchID": 0}, ["spec.replicas"]),
        ({"spec": {"replicas": 0, "patchID": 0}}, {"replicas": 0, "patchID": 0}, []),
        ({"spec": {"listenerReplicas": 2}}, {"listenerReplicas": None}, ["spec.listenerReplicas"]),
        ({"spec": {}}, {"listenerReplicas": 2}, ["spec.listenerReplicas"]),
    ],
)
def test_field_drift_names_each_key_of_an_object_field_that_differs(
    current: JSONDict, desired: JSONDict, drift: list[str]
) -> None:
    assert field_drift(current, {"spec": desired}) == drift


async def test_ensure_optimistic_sends_the_diff_on_the_version_read(
    objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    """The spec's keys `desired` names replace the read ones (a key gone from a nested object
    goes with the diff); keys it does not name stay; a write since the read is a Conflict."""
    p = begin(passes, ns)
    body = runner_body("child")
    body["spec"]["proxy"] = {"http": {"url": "http://p:3128"}, "noProxy": ["internal"]}
    current = await objects.create(EPHEMERAL_RUNNER, ns, body)
    desired: JSONDict = {
        "metadata": {"name": "child", "namespace": ns, "labels": {"l": "1"}},
        "spec": {"githubConfigSecret": "other", "proxy": {"http": {"url": "http://p:3128"}}},
    }
    assert await p.ensure(EPHEMERAL_RUNNER, desired, current, optimistic=True) is (Ensured.UPDATED)
    after = await objects.get(EPHEMERAL_RUNNER, ns, "child")
    assert after["spec"]["proxy"] == {"http": {"url": "http://p:3128"}}
    assert after["spec"]["githubConfigSecret"] == "other"
    assert after["spec"]["runnerScaleSetId"] == 1
    assert after["metadata"]["labels"] == {"l": "1"}
    assert await p.ensure(EPHEMERAL_RUNNER, desired, after, optimistic=True) is Ensured.UNCHANGED
    changed = {**desired, "spec": {"githubConfigSecret": "third"}}
    with pytest.raises(Conflict):
        await p.ensure(EPHEMERAL_RUNNER, changed, current, optimistic=True)


async def test_create_records_a_child_and_delete_says_whether_finalizers_hold_it(
    objects: Objects, passes: Passes, ns: str, runner: JSONDict
) -> None:
    p = begin(passes, ns)
    owner = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "name": "r",
        "uid": runner["metadata"]["uid"],
        "controller": True,
    }
    body = {**runner_body("child"), "metadata": {"name": "child", "ownerReferences": [owner]}}
    child = await p.create(EPHEMERAL_RUNNER, ns, body)
    assert p.unseen(lambda name: None).created == [child]
    held = {**runner_body("held"), "metadata": {"name": "held", "finalizers": ["x/y"]}}
    await p.create(EPHEMERAL_RUNNER, ns, held)
    assert await p.delete(EPHEMERAL_RUNNER, Request(ns, "held")) is Deleted.HELD
    assert await p.delete(EPHEMERAL_RUNNER, Request(ns, "child")) is Deleted.GONE
    assert await p.patch(EPHEMERAL_RUNNER, child, {"metadata": {"labels": {"x": "1"}}}) is None
