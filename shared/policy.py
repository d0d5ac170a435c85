"""Capacity policies: the optional `scalingPolicy` and the runner count it asks for.

Both processes use this module: the controller validates the policy of an AutoscalingRunnerSet
(and copies it into its listener's config), the listener validates its `scaling_policy` key and
asks `decide` for the count to publish. What each policy does: docs/policies.md.

`decide` is one pure function of (assigned jobs, bounds, policy, state, clock): the state it
returns is all it remembers between two statistics, so a table of calls is a complete test.
Without a policy it is ARC's formula, `min(minRunners + assigned, maxRunners)`.

The policy's pydantic models are in shared/policymodel.py, and `ScalingPolicy` is imported from
there when first named here: the listener calls `decide` for every set, and pydantic is
about 12 MB of its memory (docs/listener.md#memory), needed only to validate a policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.policymodel import ScalingPolicy


@dataclass(frozen=True, slots=True)
class PolicyState:
    """What `decide` remembers from one statistics to the next."""

    previous_assigned: int | None = None
    """Assigned jobs at the previous call; None before the first (which is never a burst)."""
    in_burst: bool = False
    burst_extra: int = 0
    """Extra runners of the burst in progress."""
    burst_peak_assigned: int = 0
    burst_peak_count: int = 0
    """Highest count asked for during the burst in progress: what the warm tail holds."""
    tail_count: int = 0
    tail_until: datetime | None = None
    held: int | None = None
    """The count last asked for, which the scale-down delay keeps until a lower one lasted."""
    lower_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    replicas: int
    resting: int
    """The count with no job and nothing held: publishing it is what "settled" means."""
    floor: int
    """The least count in force (minRunners, raised by an open schedule)."""
    state: PolicyState


def decide(
    *,
    assigned_jobs: int,
    min_runners: int,
    max_runners: int,
    policy: ScalingPolicy | None,
    state: PolicyState,
    now: datetime,
) -> Decision:
    """The runner count to ask for, and the state to pass to the next call."""
    assigned = max(assigned_jobs, 0)
    schedules = policy.schedules if policy is not None else None
    open_windows = [s for s in schedules or () if s.is_open(now)]
    floor = min(
        max([min_runners] + [s.min_runners for s in open_windows if s.min_runners is not None]),
        max_runners,
    )
    # Without minIdle, minRunners is also the idle count on top of the busy runners (ARC's
    # formula), raised like minRunners by an open window.
    base_idle = floor if policy is None or policy.min_idle is None else policy.min_idle
    idle = max([base_idle] + [s.min_idle for s in open_windows if s.min_idle is not None])
    count = max(floor, assigned + idle)
    resting = min(max(floor, idle), max_runners)

    if policy is not None:
        state, count = _burst(policy, state, assigned=assigned, count=count, now=now)
        if state.tail_until is not None and now < state.tail_until:
            count = max(count, state.tail_count)
        state, count = _scale_down_delay(policy, state, count=count, now=now)
    state = replace(state, previous_assigned=assigned)
    return Decision(replicas=min(count, max_runners), resting=resting, floor=floor, state=state)


def _burst(
    rules: ScalingPolicy, state: PolicyState, *, assigned: int, count: int, now: datetime
) -> tuple[PolicyState, int]:
    burst = rules.burst
    if burst is None:
        return state, count
    rise = 0 if state.previous_assigned is None else assigned - state.previous_assigned
    if rise > burst.threshold:
        extra = min(burst.max_extra, math.ceil(rise * burst.extra_percent / 100))
        if state.in_burst:
            state = replace(
                state,
                burst_extra=max(extra, state.burst_extra),
                burst_peak_assigned=max(assigned, state.burst_peak_assigned),
            )
        else:
            state = replace(
                state,
                in_burst=True,
                burst_extra=extra,
                burst_peak_assigned=assigned,
                burst_peak_count=0,
            )
    elif not state.in_burst:
        return state, count
    elif assigned < state.burst_peak_assigned:
        # The burst is over once assigned jobs fall: its highest count becomes the warm tail.
        tail = timedelta(seconds=rules.warm_tail_seconds or 0)
        if tail:
            state = replace(state, tail_count=state.burst_peak_count, tail_until=now + tail)
        return replace(state, in_burst=False, burst_extra=0, burst_peak_count=0), count
    # During a burst the count never falls below the burst's highest so far.
    count = max(count + state.burst_extra, state.burst_peak_count)
    peak_assigned = max(assigned, state.burst_peak_assigned)
    return replace(state, burst_peak_assigned=peak_assigned, burst_peak_count=count), count


def _scale_down_delay(
    rules: ScalingPolicy, state: PolicyState, *, count: int, now: datetime
) -> tuple[PolicyState, int]:
    delay = timedelta(seconds=rules.scale_down_delay_seconds or 0)
    if not delay:
        return state, count
    if state.held is None or count >= state.held:
        return replace(state, held=count, lower_since=None), count
    since = state.lower_since or now
    if now - since >= delay:
        return replace(state, held=count, lower_since=None), count
    return replace(state, lower_since=since), state.held


def utc_now() -> datetime:
    return datetime.now(UTC)


__all__ = [
    "Decision",
    "PolicyState",
    "ScalingPolicy",
    "decide",
    "utc_now",
]


def __getattr__(name: str) -> Any:
    if name == "ScalingPolicy":
        from shared import policymodel

        return getattr(policymodel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
