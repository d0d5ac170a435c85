"""The queue's urgent lane (docs/controller-runtime.md#the-urgent-lane): an urgent add is taken
before the backlog, moves a key already waiting, and a key held by a worker comes back urgent;
no key is ever handed out twice. Workers kept for the lane take from it only."""

from __future__ import annotations

import asyncio

from controller.runtime import FakeClock, Request, WorkQueue
from controller.runtime.controller import Controller, handlers
from controller.runtime.metrics import RuntimeMetrics
from shared.api.kinds import EPHEMERAL_RUNNER

BACKLOG = [Request("ns", f"r{i}") for i in range(5)]
HOT = Request("ns", "hot")


def drain(queue: WorkQueue[Request]) -> list[Request]:
    keys = []
    while (key := queue.try_get()) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def backlog() -> WorkQueue[Request]:
    queue: WorkQueue[Request] = WorkQueue("test", clock=FakeClock())
    for key in BACKLOG:
        queue.add(key)
    return queue


def test_an_urgent_add_goes_before_the_backlog() -> None:
    queue = backlog()
    assert queue.add(HOT, urgent=True)
    assert len(queue) == 6
    assert drain(queue) == [HOT, *BACKLOG]
    assert queue.urgent_adds == 1


def test_an_urgent_add_moves_a_waiting_key_which_is_taken_once() -> None:
    queue = backlog()
    assert not queue.add(BACKLOG[3], urgent=True)
    assert len(queue) == 5
    assert drain(queue) == [BACKLOG[3], *BACKLOG[:3], BACKLOG[4]]
    # An ordinary add of an urgent key leaves it urgent.
    queue.add(BACKLOG[0])
    queue.add(HOT, urgent=True)
    queue.add(HOT)
    assert drain(queue) == [HOT, BACKLOG[0]]


def test_a_key_in_a_pass_comes_back_urgent() -> None:
    queue: WorkQueue[Request] = WorkQueue("test", clock=FakeClock())
    queue.add(HOT)
    assert queue.try_get() == HOT
    for key in BACKLOG:
        queue.add(key)
    assert queue.add(HOT, urgent=True)
    assert queue.try_get() == BACKLOG[0]  # HOT is held by a worker: never handed out twice
    queue.done(BACKLOG[0])
    queue.done(HOT)
    assert drain(queue) == [HOT, *BACKLOG[1:]]


def test_the_primarys_urgent_rule_picks_the_lane() -> None:
    """The controller's handler asks the reconciler's rule of each update of its primary."""

    class Nothing:
        async def reconcile(self, request: Request) -> None: ...

    ctrl = Controller(
        name="ephemeralrunner",
        for_=EPHEMERAL_RUNNER,
        reconciler=Nothing(),  # type: ignore[arg-type]
        urgent=lambda old, new: bool(new.get("status", {}).get("jobId")),
    )
    ctrl.queue = backlog()
    [(_, handler)] = handlers(ctrl, RuntimeMetrics())

    def runner(name: str, **status: str) -> dict[str, object]:
        return {
            "apiVersion": EPHEMERAL_RUNNER.api_version,
            "kind": EPHEMERAL_RUNNER.kind,
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
            "status": status,
        }

    handler.on_update(runner("hot"), runner("hot", jobId="j"))
    handler.on_update(runner("cold"), runner("cold", ready="true"))
    assert drain(ctrl.queue) == [HOT, *BACKLOG, Request("ns", "cold")]


def test_an_urgent_only_take_leaves_the_backlog() -> None:
    queue = backlog()
    assert queue.try_get(urgent_only=True) is None
    queue.add(BACKLOG[2], urgent=True)  # moved: its old place in the backlog is skipped
    assert queue.try_get(urgent_only=True) == BACKLOG[2]
    assert queue.try_get(urgent_only=True) is None
    queue.done(BACKLOG[2])
    assert drain(queue) == [BACKLOG[0], BACKLOG[1], BACKLOG[3], BACKLOG[4]]


async def test_an_urgent_only_worker_wakes_for_an_urgent_add_only() -> None:
    queue: WorkQueue[Request] = WorkQueue("test", clock=FakeClock())
    taking = asyncio.ensure_future(queue.get(urgent_only=True))
    queue.add(BACKLOG[0])
    queue.add_after(BACKLOG[1], 5.0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not taking.done()
    queue.add(HOT, urgent=True)
    assert await taking == HOT
    # A key held by another worker comes back urgent when it is done, and wakes the worker.
    assert queue.try_get() == BACKLOG[0]
    taking = asyncio.ensure_future(queue.get(urgent_only=True))
    queue.add(BACKLOG[0], urgent=True)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not taking.done()
    queue.done(BACKLOG[0])
    assert await taking == BACKLOG[0]
    taking = asyncio.ensure_future(queue.get(urgent_only=True))
    await asyncio.sleep(0)
    queue.shutdown()
    assert await taking is None
