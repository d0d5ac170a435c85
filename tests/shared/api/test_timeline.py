"""The stage rules of a job's timeline (docs/job-timeline.md#stages): consecutive moments, a
missing one merged into the next stage, an earlier one clamped, capacity named."""

from __future__ import annotations

import pytest

from shared.api import timeline as tl


def at(seconds: float) -> str:
    return f"2026-01-01T00:{int(seconds) // 60:02d}:{seconds % 60:06.3f}Z"


FULL = {
    tl.RECEIVED: at(0),
    tl.DESIRED_WRITTEN: at(0.5),
    tl.RUNNER_CREATED: at(1),
    tl.POD_CREATED: at(2),
    tl.POD_SCHEDULED: at(5),
    tl.CONTAINER_STARTED: at(15),
    tl.RUNNER_ASSIGNED: at(18),
    tl.JOB_STARTED: at(18.25),
}


def stages(moments: dict[str, str]) -> dict[str, float]:
    return {stage.name: stage.seconds for stage in tl.Timeline(dict(moments)).stages()}


def test_each_stage_is_the_gap_between_consecutive_moments() -> None:
    assert stages(FULL) == {
        "listener": 0.5,
        "controller": 1.5,
        "scheduling": 3.0,
        "container_start": 10.0,
        "registration": 3.0,
        "job_start": 0.25,
    }
    timeline = tl.Timeline(dict(FULL, jobId="j1"))
    assert timeline.total_seconds() == 18.25
    assert timeline.explanation() == (
        "10 s in container_start: the runner container took long to start "
        "(image pull, init containers)"
    )
    assert timeline.describe().startswith("job j1 waited 18.2s: listener 0.5s, controller 1.5s")


def test_a_missing_moment_merges_its_stage_into_the_next() -> None:
    moments = {k: v for k, v in FULL.items() if k != tl.POD_SCHEDULED}
    assert stages(moments)["container_start"] == 13.0
    assert "scheduling" not in stages(moments)


def test_an_idle_runner_taking_the_job_has_no_cluster_stages() -> None:
    moments = dict(FULL)
    for key, value in ((tl.RUNNER_CREATED, -60), (tl.POD_CREATED, -59), (tl.POD_SCHEDULED, -59)):
        moments[key] = f"2025-12-31T23:59:{60 + value:02d}.000Z"
    moments[tl.CONTAINER_STARTED] = "2025-12-31T23:59:30.000Z"
    got = stages(moments)
    assert got["controller"] == got["scheduling"] == got["container_start"] == 0
    assert got["registration"] == 17.5


@pytest.mark.parametrize(
    ("capacity", "why"),
    [
        ("30/30 maxRunners", "30/30 runners busy; raise maxRunners or see minIdle"),
        ("2/5 policy", "the scaling policy held the set at 2/5 runners (docs/policies.md)"),
    ],
)
def test_a_job_held_back_waits_for_capacity(capacity: str, why: str) -> None:
    moments = dict(FULL, capacity=capacity)
    moments[tl.RUNNER_CREATED] = at(87.5)
    moments[tl.POD_CREATED] = at(88)
    timeline = tl.Timeline(moments)
    got = stages(moments)
    assert got["capacity"] == 87.0
    assert got["controller"] == 0.5
    assert timeline.explanation() == f"87 s waiting for capacity: {why}"


def test_the_event_annotation_round_trips() -> None:
    timeline = tl.Timeline(dict(FULL, jobId="j1"))
    assert tl.Timeline.from_json(timeline.to_json()) == timeline
