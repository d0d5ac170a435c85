"""The queue's urgent lane (docs/controller-runtime.md#the-urgent-lane): an urgent add is taken
before the backlog, moves a key already waiting, and a key held by a worker comes back urgent;
no key is ever handed out twice."""

from __future__ import annotations

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
