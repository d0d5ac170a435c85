"""How long failing runners wait: the EphemeralRunner's pod-failure backoff and the
EphemeralRunnerSet's replacement of Failed runners. Built from `RunnerSettings`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from shared.backoff import doubling


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """How often an idle runner's pod may fail, and how long to wait before the next pod.

    The defaults are ARC's: at most 5 recorded failures and the backoff 0, 5, 10, 20, 40, 80 s
    (doubling from `first_backoff`, capped at `max_backoff`).
    """

    max_pod_failures: int = 5
    first_backoff: timedelta = timedelta(seconds=5)
    max_backoff: timedelta = timedelta(seconds=80)
    start_timeout: timedelta | None = timedelta(minutes=10)
    """How long the runner container may wait on its image or its configuration before the pod
    counts as failed (ARC waits forever: docs/reconcilers.md#failed-runners); None waits
    forever."""

    def backoff(self, failures: int) -> timedelta:
        """The wait before the next pod after `failures` recorded failures."""
        if failures <= 0:
            return timedelta(0)
        return timedelta(
            seconds=doubling(
                self.first_backoff.total_seconds(), failures - 1, self.max_backoff.total_seconds()
            )
        )


@dataclass(frozen=True, slots=True)
class ReplacementPolicy:
    """When a `Failed` runner gives its slot to a new runner.

    The first failed runner of a lineage is replaced after `first_delay`; each failed replacement
    of it doubles the delay, up to `max_delay`, so a template that cannot work costs one attempt
    per `max_delay` per slot instead of a tight loop of JIT configs.
    """

    first_delay: timedelta = timedelta(seconds=10)
    max_delay: timedelta = timedelta(minutes=10)

    def delay(self, lineage: int) -> timedelta:
        return timedelta(
            seconds=doubling(
                self.first_delay.total_seconds(), lineage, self.max_delay.total_seconds()
            )
        )
