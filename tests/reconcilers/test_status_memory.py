"""StatusMemory recognises a repeat of this process's own status write behind a stale cache."""

from __future__ import annotations

from controller.status_memory import StatusMemory


def test_repeat_behind_a_stale_cache_is_redundant() -> None:
    memory = StatusMemory()
    memory.wrote("u", current={"ready": False}, desired={"ready": True})
    assert memory.redundant("u", current={"ready": False}, desired={"ready": True})


def test_fresh_cache_or_new_value_is_written() -> None:
    memory = StatusMemory()
    memory.wrote("u", current={"ready": False}, desired={"ready": True})
    assert not memory.redundant("u", current={"ready": True}, desired={"ready": False})
    assert not memory.redundant("u", current={"ready": False}, desired={"ready": False})


def test_foreign_value_is_corrected() -> None:
    memory = StatusMemory()
    memory.wrote("u", current={"count": 0}, desired={"count": 1})
    assert not memory.redundant("u", current={"count": 7}, desired={"count": 1})


def test_flapping_values_are_each_written() -> None:
    memory = StatusMemory()
    memory.wrote("u", current={"ready": False}, desired={"ready": True})
    memory.wrote("u", current={"ready": True}, desired={"ready": False})
    assert not memory.redundant("u", current={"ready": False}, desired={"ready": True})
    assert memory.last("u") == {"ready": False}


def test_forget() -> None:
    memory = StatusMemory()
    memory.wrote("u", current={}, desired={"runnerId": 3})
    memory.forget("u")
    assert memory.last("u") == {}
    assert not memory.redundant("u", current={}, desired={"runnerId": 3})
