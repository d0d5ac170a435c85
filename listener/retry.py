"""In-process retries of transient failures, cut short when the listener is asked to stop.

ARC's listener exits on any error and relies on its pod being recreated, which loses the message
cursor and races the old session (409). Here a transient Actions or Kubernetes failure waits with
capped, jittered exponential backoff and tries again inside the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from shared.actions.errors import ActionsError
from shared.kube.errors import KubeError

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """A failure the same call may not meet again: 5xx, 429, timeouts, connection errors."""
    return isinstance(exc, ActionsError | KubeError) and exc.retryable


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float
    maximum: float

    def wait(self) -> tenacity.wait.wait_base:
        return tenacity.wait_exponential_jitter(
            multiplier=self.initial, max=self.maximum, jitter=self.initial
        )


class Stopping(Exception):
    """The listener was asked to stop while waiting to retry."""


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, or return early and raise Stopping as soon as `stop` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    if stop.is_set():
        raise Stopping


async def retry_transient(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    backoff: Backoff,
    stop: asyncio.Event,
    retry_on: Callable[[BaseException], bool] = is_transient,
    give_up: Callable[[BaseException, float], bool] | None = None,
) -> T:
    """`operation()`, retried while it fails with an error `retry_on` accepts.

    Retries go on until it succeeds, `give_up(error, seconds since the first attempt)` says so
    (that error is raised), or `stop` is set (Stopping is raised). Other errors are raised at
    once.
    """

    def stop_rule(state: tenacity.RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if give_up is None or error is None:
            return False
        return give_up(error, state.seconds_since_start or 0.0)

    def report(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s failed (attempt %d), retrying in %.1fs: %s",
            what,
            state.attempt_number,
            delay,
            error,
        )

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(retry_on),
        wait=backoff.wait(),
        stop=stop_rule,
        sleep=lambda seconds: sleep_unless_stopped(stop, seconds),
        before_sleep=report,
        reraise=True,
    )

    async def attempt() -> T:
        # tenacity awaits only what it recognises as a coroutine function; a lambda returning
        # a coroutine is not one.
        return await operation()

    return await retrying(attempt)
