"""Expectations recognise a repeat of this process's own status write behind a stale cache.

(Moved from StatusMemory, whose API the runtime's Expectations absorbed: `wrote` became
`wrote_status`, `redundant` `status_redundant`, `last` `written_status`, and `forget(uid)` is
`forget(kind, request)` of the key that held the uid. The assertions are unchanged.)
"""

from __future__ import annotations

from controller.runtime import Expectations, Request
from controller.runtime.expectations import DELETING, Unseen
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.typedefs import JSONDict


def test_repeat_behind_a_stale_cache_is_redundant() -> None:
    memory = Expectations()
    memory.wrote_status("u", current={"ready": False}, desired={"ready": True})
    assert memory.status_redundant("u", current={"ready": False}, desired={"ready": True})


def test_fresh_cache_or_new_value_is_written() -> None:
    memory = Expectations()
    memory.wrote_status("u", current={"ready": False}, desired={"ready": True})
    assert not memory.status_redundant("u", current={"ready": True}, desired={"ready": False})
    assert not memory.status_redundant("u", current={"ready": False}, desired={"ready": False})


def test_foreign_value_is_corrected() -> None:
    memory = Expectations()
    memory.wrote_status("u", current={"count": 0}, desired={"count": 1})
    assert not memory.status_redundant("u", current={"count": 7}, desired={"count": 1})


def test_flapping_values_are_each_written() -> None:
    memory = Expectations()
    memory.wrote_status("u", current={"ready": False}, desired={"ready": True})
    memory.wrote_status("u", current={"ready": True}, desired={"ready": False})
    assert not memory.status_redundant("u", current={"ready": False}, desired={"ready": True})
    assert memory.written_status("u") == {"ready": False}


def test_forget() -> None:
    memory = Expectations()
    memory.track(EPHEMERAL_RUNNER, Request("ns", "r"), "u")
    memory.wrote_status("u", current={}, desired={"runnerId": 3})
    memory.forget(EPHEMERAL_RUNNER, Request("ns", "r"))
    assert memory.written_status("u") == {}
    assert not memory.status_redundant("u", current={}, desired={"runnerId": 3})


def child(name: str, uid: str, *, deleting: bool = False) -> JSONDict:
    meta: JSONDict = {"name": name, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    return {"metadata": meta}


def test_unseen_children_until_the_cache_shows_them() -> None:
    memory = Expectations()
    cache: dict[str, JSONDict] = {"old": child("old", "u-old"), "gone": child("gone", "u-gone")}
    looked_up: list[str] = []

    def cached(name: str) -> JSONDict | None:
        looked_up.append(name)
        return cache.get(name)

    memory.created("owner", child("new", "u-new"))
    memory.deleted("owner", cache["old"])
    memory.deleted("owner", cache["gone"])
    del cache["gone"]

    unseen = memory.unseen("owner", cached)

    assert [c["metadata"]["name"] for c in unseen.created] == ["new"]
    assert unseen.deleting == [
        {"metadata": {"name": "old", "uid": "u-old", "deletionTimestamp": DELETING}}
    ]
    # One lookup per recorded child, however many children the owner has.
    assert sorted(looked_up) == ["gone", "new", "old"]

    cache["new"] = child("new", "u-new")
    cache["old"] = child("old", "u-old", deleting=True)
    assert memory.unseen("owner", cached) == Unseen()


def test_an_expected_deletion_of_a_name_taken_again_is_dropped() -> None:
    memory = Expectations()
    memory.deleted("owner", child("r", "first"))

    assert memory.unseen("owner", {"r": child("r", "second")}.get) == Unseen()


def test_a_created_child_the_cache_showed_is_not_unseen_after_it_went() -> None:
    """A child that appeared and went between two passes of its owner: without `observed` it
    was laid over the owner's children as created-not-cached until the ttl ran out (a runner
    set then counted a runner gone long ago, and did not refill its slot)."""
    memory = Expectations()
    memory.created("owner", child("brief", "u-brief"))
    memory.observed("owner", "brief")
    assert memory.unseen("owner", lambda name: None) == Unseen()
    # Without the informer's word it is still expected.
    memory.created("owner", child("other", "u-other"))
    assert [c["metadata"]["name"] for c in memory.unseen("owner", lambda name: None).created] == [
        "other"
    ]
