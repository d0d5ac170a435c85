"""Waiting for a change of the service's state (sandbox/actions/state/data.py): a mutation
resumes only the waiters whose condition holds (docs/sandbox-actions.md, Inspection)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from sandbox.actions import ActionsEmulator

WAITERS = 50
MUTATIONS = 20


async def test_a_mutation_resumes_only_the_waiters_whose_condition_holds(
    actions: ActionsEmulator,
) -> None:
    """Idle simulated runners wait like these: thousands of them, each resumed by every
    mutation, made a burst of N runners cost N x N task switches."""
    state = actions.state
    released: set[int] = set()
    resumed = [0] * WAITERS

    def condition(index: int) -> bool:
        # Called in the waiter's own task only when that task was resumed to look.
        if asyncio.current_task() is waiters[index]:
            resumed[index] += 1
        return index in released

    waiters = [
        asyncio.create_task(state.wait_for(functools.partial(condition, i), within=None))
        for i in range(WAITERS)
    ]
    await asyncio.sleep(0)
    for index in range(MUTATIONS):
        state.create_scale_set(name=f"set-{index}", runner_group_id=1, labels=[], runner_setting={})
        await asyncio.sleep(0)

    released.add(7)
    state.create_scale_set(name="releases-7", runner_group_id=1, labels=[], runner_setting={})
    await waiters[7]

    assert [i for i, task in enumerate(waiters) if task.done()] == [7]
    # Each waiter looked once on its own before it slept; waiter 7 once more, when woken.
    assert resumed == [2 if i == 7 else 1 for i in range(WAITERS)]
    for task in waiters:
        task.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)


async def test_a_condition_that_raises_ends_its_wait_with_the_error(
    actions: ActionsEmulator,
) -> None:
    state = actions.state
    armed = False

    def condition() -> bool:
        if armed:
            raise KeyError("runner 9")
        return False

    waiter = asyncio.create_task(state.wait_for(condition, within=None))
    other = asyncio.create_task(state.wait_for(lambda: False, within=None))
    await asyncio.sleep(0)
    armed = True
    state.create_scale_set(name="any", runner_group_id=1, labels=[], runner_setting={})

    with pytest.raises(KeyError, match="runner 9"):
        await waiter
    assert not other.done()
    other.cancel()


async def test_wait_changed_returns_on_any_mutation(actions: ActionsEmulator) -> None:
    state = actions.state
    waiter = asyncio.create_task(state.wait_changed(within=3600))
    await asyncio.sleep(0)
    assert not waiter.done()

    state.create_scale_set(name="any", runner_group_id=1, labels=[], runner_setting={})

    await waiter
