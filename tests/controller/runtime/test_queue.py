"""The work queue: coalescing, one worker per key, backoff, delayed adds; on a fake clock."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import NoOpTracer

from controller.runtime import (
    Backoff,
    Controller,
    FakeClock,
    Request,
    Result,
    RuntimeMetrics,
    TerminalError,
    WorkQueue,
)
from controller.runtime.controller import worker
from shared.api.kinds import EPHEMERAL_RUNNER

A, B = Request("ns", "a"), Request("ns", "b")


def make_queue(clock: FakeClock, *, base: float = 1.0, maximum: float = 8.0) -> WorkQueue[Request]:
    return WorkQueue("test", backoff=Backoff(base=base, maximum=maximum), clock=clock)


def drain(queue: WorkQueue[Request]) -> list[Request]:
    keys = []
    while (key := queue.try_get()) is not None:
        keys.append(key)
    return keys


@pytest.mark.parametrize("adds", [1, 2, 50])
def test_adds_of_one_key_coalesce_into_one_entry(adds: int) -> None:
    queue = make_queue(FakeClock())
    for _ in range(adds):
        queue.add(A)
    queue.add(B)
    assert len(queue) == 2
    assert drain(queue) == [A, B]
    assert queue.adds == 2


def test_a_key_in_process_is_not_handed_out_again_until_done() -> None:
    queue = make_queue(FakeClock())
    queue.add(A)
    assert queue.try_get() == A
    queue.add(A)
    queue.add(A)
    assert queue.try_get() is None
    queue.done(A)
    assert drain(queue) == [A]


def test_done_without_a_new_add_leaves_nothing_ready() -> None:
    queue = make_queue(FakeClock())
    queue.add(A)
    key = queue.try_get()
    assert key == A
    queue.done(key)
    assert queue.try_get() is None


async def test_concurrent_workers_never_hold_the_same_key() -> None:
    queue = make_queue(FakeClock())
    keys = [Request("ns", f"k{i}") for i in range(5)]
    in_flight: set[Request] = set()
    overlaps: list[Request] = []
    handled = 0

    async def work() -> None:
        nonlocal handled
        while (key := await queue.get()) is not None:
            if key in in_flight:
                overlaps.append(key)
            in_flight.add(key)
            for _ in range(3):
                await asyncio.sleep(0)
            for other in keys:
                queue.add(other)
            in_flight.discard(key)
            handled += 1
            queue.done(key)
            if handled >= 200:
                queue.shutdown()

    for key in keys:
        queue.add(key)
    await asyncio.gather(*(work() for _ in range(4)))
    assert handled >= 200
    assert overlaps == []


def test_backoff_doubles_per_failure_up_to_the_maximum_and_forget_resets_it() -> None:
    queue = make_queue(FakeClock(), base=1.0, maximum=8.0)
    assert [queue.add_rate_limited(A) for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert queue.failures(A) == 5
    assert queue.add_rate_limited(B) == 1.0
    queue.forget(A)
    assert queue.add_rate_limited(A) == 1.0


@pytest.mark.parametrize("failures", [0, 1, 3])
async def test_a_rate_limited_key_is_ready_exactly_when_its_backoff_ends(failures: int) -> None:
    clock = FakeClock()
    queue = make_queue(clock, base=1.0, maximum=100.0)
    for _ in range(failures):
        queue.add_rate_limited(A)
        await clock.advance(100)
        assert drain(queue) == [A]
        queue.done(A)
    delay = queue.add_rate_limited(A)
    assert delay == 2.0**failures
    await clock.advance(delay - 0.001)
    assert queue.try_get() is None
    await clock.advance(0.001)
    assert queue.try_get() == A


@pytest.mark.parametrize(
    ("first", "second", "ready_at"),
    [(5.0, 2.0, 2.0), (2.0, 5.0, 2.0), (3.0, 3.0, 3.0)],
)
async def test_add_after_keeps_the_earliest_schedule(
    first: float, second: float, ready_at: float
) -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    queue.add_after(A, first)
    queue.add_after(A, second)
    await clock.advance(ready_at - 0.001)
    assert queue.try_get() is None
    await clock.advance(0.001)
    assert queue.try_get() == A
    queue.done(A)
    await clock.advance(10)
    assert queue.try_get() is None


async def test_a_waiting_get_wakes_when_a_delayed_key_falls_due() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after(A, 30)
    await asyncio.sleep(0)
    assert not getter.done()
    await clock.advance(30)
    assert await asyncio.wait_for(getter, 5) == A


async def test_shutdown_releases_waiting_gets() -> None:
    queue = make_queue(FakeClock())
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.shutdown()
    assert await asyncio.wait_for(asyncio.gather(*getters), 5) == [None, None, None]


class Scripted:
    """A reconciler that plays back outcomes and records each call."""

    def __init__(self, outcomes: list[Result | Exception]) -> None:
        self.outcomes = outcomes
        self.calls: list[Request] = []
        self.called = asyncio.Condition()

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        async with self.called:
            self.called.notify_all()
        outcome = self.outcomes.pop(0) if self.outcomes else Result()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def run_worker(
    outcomes: list[Result | Exception], clock: FakeClock
) -> tuple[Controller, Scripted, asyncio.Task[None]]:
    reconciler = Scripted(outcomes)
    ctrl = Controller(name="test", for_=EPHEMERAL_RUNNER, reconciler=reconciler)
    ctrl.queue = make_queue(clock, base=1.0, maximum=60.0)
    task = asyncio.create_task(worker(ctrl, RuntimeMetrics(), NoOpTracer()))
    return ctrl, reconciler, task


async def wait_calls(reconciler: Scripted, count: int) -> None:
    async with asyncio.timeout(5), reconciler.called:
        await reconciler.called.wait_for(lambda: len(reconciler.calls) >= count)


async def stop(ctrl: Controller, task: asyncio.Task[None]) -> None:
    ctrl.queue.shutdown()
    await asyncio.wait_for(task, 5)


async def test_worker_backs_off_after_errors_and_resets_after_success() -> None:
    clock = FakeClock()
    ctrl, reconciler, task = await run_worker(
        [RuntimeError("one"), RuntimeError("two"), Result()], clock
    )
    ctrl.queue.add(A)
    await wait_calls(reconciler, 1)
    assert ctrl.queue.failures(A) == 1
    await clock.advance(1.0)
    await wait_calls(reconciler, 2)
    assert ctrl.queue.failures(A) == 2
    await clock.advance(1.999)
    await asyncio.sleep(0)
    assert len(reconciler.calls) == 2
    await clock.advance(0.001)
    await wait_calls(reconciler, 3)
    await asyncio.sleep(0)
    assert ctrl.queue.failures(A) == 0
    assert ctrl.queue.waiting == 0
    await stop(ctrl, task)


async def test_worker_requeues_after_the_requested_delay_without_backoff() -> None:
    clock = FakeClock()
    ctrl, reconciler, task = await run_worker([Result(requeue_after=7.0), Result()], clock)
    ctrl.queue.add(A)
    await wait_calls(reconciler, 1)
    assert ctrl.queue.failures(A) == 0
    assert ctrl.queue.waiting == 1
    await clock.advance(7.0)
    await wait_calls(reconciler, 2)
    await stop(ctrl, task)


async def test_worker_does_not_requeue_a_terminal_error() -> None:
    clock = FakeClock()
    ctrl, reconciler, task = await run_worker([TerminalError("bad spec")], clock)
    ctrl.queue.add(A)
    await wait_calls(reconciler, 1)
    await asyncio.sleep(0)
    assert ctrl.queue.waiting == 0
    assert ctrl.queue.failures(A) == 0
    await stop(ctrl, task)


async def test_the_wait_observer_times_a_key_from_its_first_add_to_a_worker() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    waits: list[float] = []
    queue.observe_wait = waits.append
    queue.add(A)
    await clock.advance(2.0)
    queue.add(A)  # coalesced: the key keeps waiting since its first add
    await clock.advance(1.0)
    assert queue.try_get() == A
    queue.add(A)  # added while processing: it waits from now until `done` hands it out again
    await clock.advance(0.5)
    queue.done(A)
    assert queue.try_get() == A
    assert waits == [3.0, 0.5]


async def test_deferred_adds_of_a_window_ride_on_one_pass() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    assert queue.add_deferred(A, 1.0) is True
    await clock.advance(0.5)
    # Later deferrals of the window coalesce into the scheduled one.
    assert queue.add_deferred(A, 1.0) is False
    assert queue.deferred == 1
    assert queue.try_get() is None
    await clock.advance(0.5)
    assert drain(queue) == [A]
    queue.done(A)
    await clock.advance(10)
    assert queue.try_get() is None
    # A deferred add that fell due is not a requeue.
    assert (queue.requeues, queue.deferred) == (0, 0)


async def test_a_pass_taken_sooner_cancels_the_deferral() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    queue.add_deferred(A, 1.0)
    assert queue.add(A) is True
    assert drain(queue) == [A]
    queue.done(A)
    assert queue.deferred == 0
    await clock.advance(5)
    assert queue.try_get() is None


async def test_a_deferral_never_delays_a_key_already_waiting_or_due_sooner() -> None:
    clock = FakeClock()
    queue = make_queue(clock)
    queue.add(A)
    assert queue.add_deferred(A, 1.0) is False
    queue.add_after(B, 0.5)
    assert queue.add_deferred(B, 1.0) is False
    await clock.advance(0.5)
    assert drain(queue) == [A, B]
    assert queue.requeues == 1


async def test_a_deferral_scheduled_during_a_pass_still_runs() -> None:
    """The pass in progress may have read the object before the deferred change."""
    clock = FakeClock()
    queue = make_queue(clock)
    queue.add(A)
    assert queue.try_get() == A
    queue.add_deferred(A, 1.0)
    queue.done(A)
    await clock.advance(1.0)
    assert queue.try_get() == A
