"""Type aliases the whole project shares: the one home for how raw JSON is typed."""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]
"""A decoded JSON object: a Kubernetes object, a patch, a message body."""
