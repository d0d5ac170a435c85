"""The one capped doubling backoff (shared/backoff.py)."""

from __future__ import annotations

import pytest

from shared.backoff import doubling


@pytest.mark.parametrize(
    ("attempt", "delay"),
    [(-1, 0.5), (0, 0.5), (1, 1.0), (3, 4.0), (4, 5.0), (10_000, 5.0)],
)
def test_doubles_from_the_base_up_to_the_cap(attempt: int, delay: float) -> None:
    assert doubling(0.5, attempt, 5.0) == delay
