"""The (replicas, patchID) sequence of docs/listener.md, "Replicas and the patch id".

The cases are those ARC's scaler_test tabulates.
"""

from __future__ import annotations

import pytest

from listener.config import MAX_INT32
from listener.scaler import Desired, Scaler

BOUNDS = [(0, MAX_INT32), (1, MAX_INT32), (0, 5), (1, 3)]


@pytest.mark.parametrize(("min_runners", "max_runners"), BOUNDS)
def test_first_publication_has_patch_id_zero(min_runners: int, max_runners: int) -> None:
    scaler = Scaler(min_runners=min_runners, max_runners=max_runners)
    assert scaler.desired(2) == Desired(replicas=min(min_runners + 2, max_runners), patch_id=0)


@pytest.mark.parametrize(("min_runners", "max_runners"), BOUNDS)
def test_new_demand_gets_the_next_sequence_number(min_runners: int, max_runners: int) -> None:
    scaler = Scaler(min_runners=min_runners, max_runners=max_runners)
    scaler.desired(0)
    assert scaler.desired(1).patch_id == 1
    assert scaler.desired(1).patch_id == 2


@pytest.mark.parametrize(("min_runners", "max_runners"), BOUNDS)
def test_job_events_give_a_sequence_number_even_at_min(min_runners: int, max_runners: int) -> None:
    scaler = Scaler(min_runners=min_runners, max_runners=max_runners)
    scaler.desired(0)
    scaler.job_event()
    assert scaler.desired(0) == Desired(replicas=min_runners, patch_id=1)


@pytest.mark.parametrize(("min_runners", "max_runners"), BOUNDS)
def test_idle_at_min_publishes_zero_while_the_sequence_continues(
    min_runners: int, max_runners: int
) -> None:
    scaler = Scaler(min_runners=min_runners, max_runners=max_runners)
    scaler.desired(1)
    scaler.job_event()
    assert scaler.desired(0).patch_id == 1
    assert scaler.desired(0) == Desired(replicas=min_runners, patch_id=0)
    assert scaler.desired(0).patch_id == 0
    assert scaler.desired(1).patch_id == 4


@pytest.mark.parametrize(("min_runners", "max_runners"), BOUNDS)
def test_count_is_clamped_to_max(min_runners: int, max_runners: int) -> None:
    scaler = Scaler(min_runners=min_runners, max_runners=max_runners)
    assert scaler.desired(MAX_INT32).replicas == max_runners


def test_first_return_to_min_is_not_settled_yet() -> None:
    scaler = Scaler(min_runners=0, max_runners=5)
    scaler.desired(3)
    assert scaler.desired(0).patch_id == 1
    assert scaler.desired(0).patch_id == 0


def test_failed_publication_keeps_the_next_one_unsettled() -> None:
    scaler = Scaler(min_runners=0, max_runners=5)
    scaler.desired(0)
    scaler.desired(0)
    scaler.publication_failed()
    assert scaler.desired(0).patch_id == 2


def test_sequence_wraps_to_one_after_max_int32() -> None:
    scaler = Scaler(min_runners=0, max_runners=5)
    scaler._sequence = MAX_INT32 - 1
    assert scaler.desired(1).patch_id == MAX_INT32
    assert scaler.desired(2).patch_id == 1


def test_runner_set_patch_carries_replicas_and_patch_id() -> None:
    assert Desired(replicas=0, patch_id=7).ers_patch() == {"spec": {"replicas": 0, "patchID": 7}}


def test_runner_set_patch_carries_the_scale_set_id_when_given() -> None:
    patch = Desired(replicas=2, patch_id=3).ers_patch(scale_set_id=42)
    assert patch == {
        "spec": {"replicas": 2, "patchID": 3, "ephemeralRunnerSpec": {"runnerScaleSetId": 42}}
    }
