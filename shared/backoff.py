"""The one capped doubling backoff every retry loop of both processes uses."""

from __future__ import annotations


def doubling(base: float, attempt: int, maximum: float) -> float:
    """`base * 2**attempt`, at most `maximum`: `base` for attempt 0 (or less), twice that for
    attempt 1, and so on. The exponent is bounded, so no attempt count overflows a float."""
    return min(base * 2.0 ** min(max(attempt, 0), 64), maximum)
