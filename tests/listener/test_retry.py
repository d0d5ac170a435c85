"""In-process retries: which errors are retried, giving up, and stopping mid-backoff."""

from __future__ import annotations

import asyncio

import pytest

from listener.retry import Backoff, Stopping, is_transient, retry_transient
from shared.actions.errors import ActionsServerError, SessionConflict, TokenExpired
from shared.kube.errors import Forbidden, ServerError, Timeout

TINY = Backoff(initial=0.001, maximum=0.002)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ActionsServerError("503"), True),
        (ServerError("500"), True),
        (Timeout("timed out"), True),
        (TokenExpired("401"), False),
        (SessionConflict("409"), False),
        (Forbidden("403"), False),
        (RuntimeError("bug"), False),
    ],
)
def test_is_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


class Flaky:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0
        self.called = asyncio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        self.called.set()
        if self.errors:
            raise self.errors.pop(0)
        return "done"


async def test_transient_errors_are_retried_until_success() -> None:
    operation = Flaky([ServerError("500"), Timeout("t"), ActionsServerError("503")])
    result = await retry_transient(operation, what="op", backoff=TINY, stop=asyncio.Event())
    assert (result, operation.calls) == ("done", 4)


async def test_a_lambda_returning_a_coroutine_is_awaited() -> None:
    operation = Flaky([ServerError("500")])
    result = await retry_transient(
        lambda: operation(), what="op", backoff=TINY, stop=asyncio.Event()
    )
    assert (result, operation.calls) == ("done", 2)


async def test_other_errors_are_raised_at_once() -> None:
    operation = Flaky([Forbidden("403")])
    with pytest.raises(Forbidden):
        await retry_transient(operation, what="op", backoff=TINY, stop=asyncio.Event())
    assert operation.calls == 1


async def test_give_up_raises_the_last_error() -> None:
    operation = Flaky([ServerError("1"), ServerError("2"), ServerError("3")])
    with pytest.raises(ServerError, match="2"):
        await retry_transient(
            operation,
            what="op",
            backoff=TINY,
            stop=asyncio.Event(),
            give_up=lambda _exc, _elapsed: operation.calls >= 2,
        )


async def test_stop_interrupts_the_backoff() -> None:
    stop = asyncio.Event()
    operation = Flaky([ServerError("500")])
    task = asyncio.create_task(
        retry_transient(
            operation, what="op", backoff=Backoff(initial=3600, maximum=3600), stop=stop
        )
    )
    await operation.called.wait()
    stop.set()
    with pytest.raises(Stopping):
        await asyncio.wait_for(task, 5)
