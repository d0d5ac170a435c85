"""The reconcile contract: a key in, a `Result` out (controller-runtime's `pkg/reconcile`).

Reconciliation is level-based: a reconciler is told *which* object to look at, never *what*
happened to it, so any number of events for one key collapse into one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """The key of the object to reconcile."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, obj: dict[str, Any]) -> Request:
        meta = obj["metadata"]
        return cls(meta.get("namespace", ""), meta["name"])


@dataclass(frozen=True, slots=True)
class Result:
    """What to do with the key after a successful reconcile.

    `requeue_after` (seconds) reconciles the key again after that delay, without counting as a
    failure; None forgets the key until the next event.
    """

    requeue_after: float | None = None

    def sooner(self, delay: float | None) -> Result:
        """This result, or one that comes back after `delay` when that is sooner."""
        if delay is None or (self.requeue_after is not None and self.requeue_after <= delay):
            return self
        return Result(requeue_after=delay)


class TerminalError(Exception):
    """A failure that retrying cannot fix (a bad spec): logged and counted, never requeued."""


class Reconciler(Protocol):
    """Brings the cluster in line with the object behind `request`.

    Raising any other exception requeues the key with per-key exponential backoff; returning
    resets that backoff.
    """

    async def reconcile(self, request: Request) -> Result: ...
