"""The emulator's time: a replaceable clock and metav1.Time's wire format."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def timestamp(when: dt.datetime) -> str:
    """RFC 3339 at second precision with `Z`, as metav1.Time marshals."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
