"""Lazy copies: nothing is copied until mutate(), the cached original is never edited, and the
patch is exactly the change."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from controller.runtime import LazyObject
from controller.runtime.lazy import copy_observer
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.typedefs import JSONDict


def runner() -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": "r", "namespace": "ns", "resourceVersion": "5", "finalizers": []},
        "spec": {"githubConfigUrl": "https://github.com/o"},
        "status": {"phase": "Pending", "message": "starting"},
    }


@pytest.fixture
def copies() -> Iterator[list[int]]:
    taken: list[int] = []
    token = copy_observer.set(lambda: taken.append(1))
    yield taken
    copy_observer.reset(token)


def test_reading_without_mutate_copies_nothing(copies: list[int]) -> None:
    cached = runner()
    handle = LazyObject(cached, kind=EPHEMERAL_RUNNER)
    assert handle.object is cached
    assert handle.object["status"]["phase"] == "Pending"
    assert handle.patch() == {}
    assert not handle.copied
    assert copies == []


def test_mutate_copies_once_and_returns_the_same_live_object(copies: list[int]) -> None:
    handle = LazyObject(runner(), kind=EPHEMERAL_RUNNER)
    first = handle.mutate()
    second = handle.mutate()
    assert first is second
    assert handle.object is first
    assert copies == [1]


def test_the_snapshot_is_taken_before_the_first_mutation(copies: list[int]) -> None:
    cached = runner()
    pristine = copy.deepcopy(cached)
    handle = LazyObject(cached, kind=EPHEMERAL_RUNNER)
    live = handle.mutate()
    live["status"]["phase"] = "Failed"
    live["metadata"]["finalizers"].append("f")
    assert live is not cached
    assert cached == pristine


def edit_status(obj: JSONDict) -> None:
    obj["status"]["phase"] = "Running"


def remove_message(obj: JSONDict) -> None:
    del obj["status"]["message"]


def add_two_finalizers(obj: JSONDict) -> None:
    obj["metadata"]["finalizers"] += ["a", "b"]


def edit_both(obj: JSONDict) -> None:
    obj["metadata"].setdefault("labels", {})["x"] = "y"
    obj["status"]["phase"] = "Failed"


def no_change(obj: JSONDict) -> None:
    obj["status"]["phase"] = "Pending"


@pytest.mark.parametrize(
    ("edit", "patch"),
    [
        (edit_status, {"status": {"phase": "Running"}}),
        (remove_message, {"status": {"message": None}}),
        (add_two_finalizers, {"metadata": {"finalizers": ["a", "b"]}}),
        (edit_both, {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Failed"}}),
        (no_change, {}),
    ],
)
def test_the_patch_is_exactly_the_change(edit: Any, patch: JSONDict) -> None:
    handle = LazyObject(runner(), kind=EPHEMERAL_RUNNER)
    edit(handle.mutate())
    assert handle.patch() == patch
