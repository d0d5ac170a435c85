"""The Scaler with a scaling policy: the count comes from shared.policy.decide, and "settled"
(patch id 0) means back at the policy's resting count (docs/policies.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from listener.scaler import Desired, Scaler
from shared.policy import ScalingPolicy

START = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def delayed_scaler(clock: FakeClock) -> Scaler:
    return Scaler(
        min_runners=0,
        max_runners=10,
        policy=ScalingPolicy.model_validate({"scaleDownDelaySeconds": 300}),
        clock=clock,
    )


def test_idle_at_min_idle_is_settled() -> None:
    """ARC's scaler would never publish 0 here: its resting count is min_runners (0)."""
    scaler = Scaler(
        min_runners=0, max_runners=10, policy=ScalingPolicy.model_validate({"minIdle": 2})
    )
    scaler.desired(0)
    assert scaler.desired(0) == Desired(replicas=2, patch_id=0)


def test_a_held_count_is_never_settled_until_the_hold_ends() -> None:
    clock = FakeClock()
    scaler = delayed_scaler(clock)
    scaler.desired(0)
    scaler.desired(5)
    clock.advance(10)
    held = [scaler.desired(0) for _ in range(3)]
    assert [(d.replicas, d.patch_id != 0) for d in held] == [(5, True)] * 3
    clock.advance(300)
    assert scaler.desired(0) == Desired(replicas=0, patch_id=5)
    assert scaler.desired(0) == Desired(replicas=0, patch_id=0)


def test_a_batch_not_published_moves_the_policy_but_not_the_sequence() -> None:
    """`replicas` says what `desired` would publish, and asking moves nothing; a batch whose
    count stands is not published (docs/listener.md, "Replicas and the patch id"), but its
    lower count starts the scale-down delay as a published one would."""
    clock = FakeClock()
    scaler = delayed_scaler(clock)
    scaler.desired(0)
    assert scaler.replicas(5) == 5
    assert scaler.desired(5) == Desired(replicas=5, patch_id=1)
    clock.advance(10)
    assert scaler.replicas(0) == 5  # held by the delay: the batch is not published
    scaler.unpublished(0)
    clock.advance(300)
    assert scaler.replicas(0) == 0
    assert scaler.desired(0) == Desired(replicas=0, patch_id=2)
