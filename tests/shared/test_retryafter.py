"""One reading of `Retry-After` for both clients (shared/retryafter.py). Before, the Actions
client understood HTTP dates and the Kubernetes client did not."""

from __future__ import annotations

import pytest

from shared.retryafter import retry_after_seconds

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        (3, 3.0),  # a Status's details.retryAfterSeconds
        ("1.5", 1.5),
        ("-4", 0.0),
        ("Tue, 14 Nov 2023 22:13:30 GMT", 10.0),
        ("Tue, 14 Nov 2023 22:13:00 GMT", 0.0),  # already past
        ("soon", None),
        ("inf", None),
        ("nan", None),
        (True, None),
        (None, None),
        ({"seconds": 1}, None),
    ],
)
def test_retry_after_seconds(value: object, seconds: float | None) -> None:
    assert retry_after_seconds(value, now=NOW) == seconds
