"""Expectations recognise a repeat of this process's own status write behind a stale cache.

(Moved from StatusMemory, whose API the runtime's Expectations absorbed: `wrote` became
`wrote_status`, `redundant` `status_redundant`, `last` `written_status`, and `forget(uid)` is
`forget(kind, request)` of the key that held the uid. The assertions are unchanged.)
"""

from __future__ import annotations

from controller.runtime import Expectations, Request
from shared.api.kinds import EPHEMERAL_RUNNER


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
