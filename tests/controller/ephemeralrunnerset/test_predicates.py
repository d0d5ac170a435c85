"""Which runner changes the set only counts (deferred to its one-second window) and which wake
it at once (docs/reconcilers.md#wakes-per-runner)."""

from __future__ import annotations

import copy

import pytest

from controller.ephemeralrunnerset.predicates import only_counted
from shared.typedefs import JSONDict


def runner(phase: str = "Pending", /, **meta: object) -> JSONDict:
    return {
        "metadata": {"name": "r", "namespace": "ns", "resourceVersion": "1", "labels": {}, **meta},
        "spec": {"ephemeralRunnerSpec": {}},
        "status": {"phase": phase, "runnerId": 0},
    }


DELETING: dict[str, object] = {
    "deletionTimestamp": "2026-12-04T10:00:00Z",
    "deletionGracePeriodSeconds": 0,
}


def changed(old: JSONDict, **edits: object) -> JSONDict:
    new = copy.deepcopy(old)
    for path, value in edits.items():
        part, field = path.split("__")
        new[part][field] = value
    new["metadata"]["resourceVersion"] = "2"
    return new


@pytest.mark.parametrize(
    ("old", "new", "counted"),
    [
        # Registration and a job change the counts only.
        (runner(), changed(runner(), status__runnerId=7), True),
        (runner(), changed(runner(), status__phase="Running"), True),
        # A runner whose deletion starts keeps its slot until it is gone: counts only. It used
        # to wake the set at once, a second wake per runner with the one of its going.
        (runner("Running"), runner("Running", generation=2, **DELETING), True),
        # A terminal phase, labels or spec wake the set at once.
        (runner("Running"), changed(runner("Running"), status__phase="Failed"), False),
        (runner(), changed(runner(), metadata__labels={"a": "b"}), False),
        (runner(), changed(runner(), spec__ephemeralRunnerSpec={"x": 1}), False),
        # A deletion that comes with another change, or a change to a runner already going.
        (runner(), runner(labels={"a": "b"}, **DELETING), False),
        (runner(), runner("Failed", **DELETING), False),
        (runner(**DELETING), runner(labels={"a": "b"}, **DELETING), False),
    ],
)
def test_what_the_set_only_counts(old: JSONDict, new: JSONDict, counted: bool) -> None:
    assert only_counted(old, new) is counted
