"""The capacity policies' desired count (shared/policy.py): tables of calls, and properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.policy import PolicyState, ScalingPolicy, decide

# A Wednesday, 10:00 in Berlin (UTC+1 in December).
WEDNESDAY_10_BERLIN = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
BERLIN_OFFICE = {
    "cron": "0 8 * * 1-5",
    "duration": "10h",
    "timeZone": "Europe/Berlin",
    "minRunners": 3,
    "minIdle": 5,
}


def run(
    policy: dict[str, Any] | None,
    steps: list[tuple[int, float]],
    *,
    min_runners: int = 0,
    max_runners: int = 100,
    start: datetime = WEDNESDAY_10_BERLIN,
) -> list[int]:
    """The counts asked for by a sequence of (assigned jobs, seconds since start) statistics."""
    parsed = None if policy is None else ScalingPolicy.model_validate(policy)
    state = PolicyState()
    counts = []
    for assigned, seconds in steps:
        decision = decide(
            assigned_jobs=assigned,
            min_runners=min_runners,
            max_runners=max_runners,
            policy=parsed,
            state=state,
            now=start + timedelta(seconds=seconds),
        )
        state = decision.state
        counts.append(decision.replicas)
    return counts


@pytest.mark.parametrize(
    ("policy", "min_runners", "max_runners", "steps", "expected"),
    [
        pytest.param(None, 2, 10, [(0, 0), (3, 1), (20, 2)], [2, 5, 10], id="arc-formula"),
        pytest.param({}, 2, 10, [(0, 0), (3, 1)], [2, 5], id="empty-policy-is-arc"),
        pytest.param(
            {"minIdle": 2}, 0, 10, [(0, 0), (3, 1), (9, 2)], [2, 5, 10], id="min-idle-on-busy"
        ),
        pytest.param(
            {"minIdle": 2}, 6, 10, [(0, 0), (3, 1), (5, 2)], [6, 6, 7], id="min-runners-is-a-floor"
        ),
        pytest.param(
            {"schedules": [BERLIN_OFFICE]}, 0, 10, [(0, 0), (2, 1)], [5, 7], id="office-hours-open"
        ),
        pytest.param(
            {"minIdle": 1, "schedules": [BERLIN_OFFICE]},
            0,
            10,
            [(0, 9 * 3600), (2, 9 * 3600 + 1)],
            [1, 3],
            id="office-hours-closed-at-19h",
        ),
        pytest.param(
            {"schedules": [{**BERLIN_OFFICE, "minIdle": None}]},
            0,
            10,
            [(0, 0), (2, 1)],
            [3, 5],
            id="schedule-min-runners-alone-acts-as-arc-min-runners",
        ),
        pytest.param(
            {"burst": {"threshold": 5, "extraPercent": 50, "maxExtra": 4}},
            0,
            100,
            [(0, 0), (4, 1), (14, 2), (16, 3), (16, 4), (15, 5)],
            [0, 4, 14 + 4, 16 + 4, 20, 15],
            id="burst-extra-bounded-until-jobs-fall",
        ),
        pytest.param(
            {"burst": {"threshold": 5, "extraPercent": 50, "maxExtra": 40}},
            0,
            100,
            [(0, 0), (10, 1)],
            [0, 15],
            id="burst-extra-proportional",
        ),
        pytest.param(
            {"burst": {"threshold": 5, "maxExtra": 40}},
            0,
            100,
            [(20, 0), (20, 1)],
            [20, 20],
            id="first-statistics-are-no-burst",
        ),
        pytest.param(
            {"burst": {"threshold": 5, "maxExtra": 10}, "warmTailSeconds": 600},
            0,
            100,
            [(0, 0), (10, 1), (2, 2), (0, 300), (0, 602)],
            [0, 20, 20, 20, 0],
            id="warm-tail-holds-the-peak",
        ),
        pytest.param(
            {"scaleDownDelaySeconds": 300},
            1,
            100,
            [(0, 0), (8, 10), (2, 20), (0, 200), (0, 320), (0, 330)],
            [1, 9, 9, 9, 1, 1],
            id="scale-down-delay-after-a-lower-count-lasted",
        ),
        pytest.param(
            {"scaleDownDelaySeconds": 300},
            0,
            100,
            [(8, 0), (2, 10), (8, 20), (2, 30), (2, 320), (2, 330)],
            [8, 8, 8, 8, 8, 2],
            id="scale-down-delay-restarts-when-the-count-comes-back",
        ),
        pytest.param(
            {"minIdle": 50, "burst": {"threshold": 0, "maxExtra": 50}},
            0,
            10,
            [(0, 0), (9, 1)],
            [10, 10],
            id="never-above-max",
        ),
    ],
)
def test_desired_count(
    policy: dict[str, Any] | None,
    min_runners: int,
    max_runners: int,
    steps: list[tuple[int, float]],
    expected: list[int],
) -> None:
    assert run(policy, steps, min_runners=min_runners, max_runners=max_runners) == expected


def test_the_resting_count_is_the_floor_and_the_idle_count() -> None:
    decision = decide(
        assigned_jobs=4,
        min_runners=1,
        max_runners=10,
        policy=ScalingPolicy.model_validate({"minIdle": 3}),
        state=PolicyState(),
        now=WEDNESDAY_10_BERLIN,
    )
    assert (decision.replicas, decision.resting, decision.floor) == (7, 3, 1)


@pytest.mark.parametrize(
    ("now", "open_"),
    [
        (datetime(2026, 12, 2, 7, 0, tzinfo=UTC), True),  # 08:00 Berlin: opens
        (datetime(2026, 12, 2, 6, 59, 59, tzinfo=UTC), False),
        (datetime(2026, 12, 2, 16, 59, 59, tzinfo=UTC), True),
        (datetime(2026, 12, 2, 17, 0, tzinfo=UTC), False),  # 18:00 Berlin: closed
        (datetime(2026, 12, 5, 9, 0, tzinfo=UTC), False),  # Saturday
        (datetime(2026, 7, 1, 6, 0, tzinfo=UTC), True),  # 08:00 in summer time (UTC+2)
    ],
)
def test_a_schedule_window_is_read_in_its_time_zone(now: datetime, open_: bool) -> None:
    policy = ScalingPolicy.model_validate({"schedules": [BERLIN_OFFICE]})
    assert policy.schedules is not None
    assert policy.schedules[0].is_open(now) is open_


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        ({"minIdle": -1}, "minIdle"),
        ({"schedules": [{**BERLIN_OFFICE, "cron": "0 25 * * *"}]}, "not a cron expression"),
        ({"schedules": [{**BERLIN_OFFICE, "cron": "0 8 * * 1-5 2026"}]}, "not a cron expression"),
        ({"schedules": [{**BERLIN_OFFICE, "cron": "R 8 * * *"}]}, "not a cron expression"),
        ({"schedules": [{**BERLIN_OFFICE, "duration": "10 hours"}]}, "not a positive duration"),
        ({"schedules": [{**BERLIN_OFFICE, "duration": "0s"}]}, "not a positive duration"),
        ({"schedules": [{**BERLIN_OFFICE, "timeZone": "Europe/Berln"}]}, "unknown time zone"),
        (
            {"schedules": [{"cron": "@daily", "duration": "1h"}]},
            "must set minRunners, minIdle or both",
        ),
        ({"warmTailSeconds": 60}, "warmTailSeconds needs burst"),
        ({"burst": {"threshold": 1}}, "maxExtra"),
        ({"minIdel": 1}, "minIdel"),
    ],
)
def test_a_bad_policy_is_refused_with_what_to_fix(policy: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ScalingPolicy.model_validate(policy)
    assert problem in str(raised.value)


def test_bound_problems_name_each_field() -> None:
    policy = ScalingPolicy.model_validate(
        {"minIdle": 6, "schedules": [{**BERLIN_OFFICE, "minRunners": 9, "minIdle": 1}]}
    )
    assert policy.bound_problems(min_runners=0, max_runners=5) == [
        "minIdle must not be greater than maxRunners (6 > 5)",
        "schedules[0].minRunners must not be greater than maxRunners (9 > 5)",
    ]


# --- properties ------------------------------------------------------------------------------

policies = st.builds(
    lambda min_idle, burst, tail, delay, window: ScalingPolicy.model_validate(
        {
            "minIdle": min_idle,
            "burst": burst,
            "warmTailSeconds": tail if burst else None,
            "scaleDownDelaySeconds": delay,
            "schedules": [window] if window else None,
        }
    ),
    st.none() | st.integers(0, 20),
    st.none()
    | st.fixed_dictionaries(
        {
            "threshold": st.integers(0, 10),
            "extraPercent": st.integers(0, 300),
            "maxExtra": st.integers(0, 30),
        }
    ),
    st.none() | st.integers(0, 900),
    st.none() | st.integers(0, 900),
    st.none()
    | st.fixed_dictionaries(
        {
            "cron": st.sampled_from(["0 8 * * 1-5", "*/10 * * * *", "@hourly"]),
            "duration": st.sampled_from(["10h", "5m", "30s"]),
            "timeZone": st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
            "minRunners": st.integers(0, 30),
            "minIdle": st.integers(0, 30),
        }
    ),
)
histories = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 400)), max_size=12)


@st.composite
def situations(draw: st.DrawFn) -> tuple[ScalingPolicy, int, int, PolicyState, datetime]:
    """A policy, bounds, and the state after a random history of statistics."""
    policy = draw(policies)
    max_runners = draw(st.integers(0, 60))
    min_runners = draw(st.integers(0, max_runners))
    now = WEDNESDAY_10_BERLIN + timedelta(minutes=draw(st.integers(0, 7 * 24 * 60)))
    state = PolicyState()
    for assigned, seconds in draw(histories):
        now += timedelta(seconds=seconds)
        state = decide(
            assigned_jobs=assigned,
            min_runners=min_runners,
            max_runners=max_runners,
            policy=policy,
            state=state,
            now=now,
        ).state
    return (
        policy,
        min_runners,
        max_runners,
        state,
        now + timedelta(seconds=draw(st.integers(0, 400))),
    )


# No time limit per example: a shared CI machine must not turn a slow example into a failure.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations(), st.integers(0, 80), st.integers(0, 80))
def test_never_above_max_never_below_the_floor_and_monotone_in_assigned_jobs(
    situation: tuple[ScalingPolicy, int, int, PolicyState, datetime], one: int, other: int
) -> None:
    policy, min_runners, max_runners, state, now = situation
    low, high = sorted((one, other))
    decisions = [
        decide(
            assigned_jobs=assigned,
            min_runners=min_runners,
            max_runners=max_runners,
            policy=policy,
            state=state,
            now=now,
        )
        for assigned in (low, high)
    ]
    for decision in decisions:
        assert decision.floor >= min_runners
        assert decision.floor <= decision.replicas <= max_runners
    assert decisions[0].replicas <= decisions[1].replicas
