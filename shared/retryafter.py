"""`Retry-After`, read one way for both clients (the Kubernetes API's and the Actions
service's): delay seconds or an HTTP date (RFC 9110), or a Status's `retryAfterSeconds`."""

from __future__ import annotations

import math
import time
from email.utils import parsedate_to_datetime


def retry_after_seconds(value: object, *, now: float | None = None) -> float | None:
    """The delay `value` asks for, in seconds (a date in the past is 0); None when it is not
    one. `now` (epoch seconds) is when an HTTP date is measured from: the current time."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isnan(seconds):
        return max(0.0, seconds) if math.isfinite(seconds) else None
    if not isinstance(value, str):
        return None
    try:
        at = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, at - (time.time() if now is None else now))
