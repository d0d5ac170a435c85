"""What one mutation costs the Actions emulator, counted (not timed): with many simulated runners
waiting for a job, a mutation checks the waiters it concerns, not every waiting runner
(docs/sandbox-actions.md, Inspection)."""

from __future__ import annotations

import asyncio

from sandbox.actions import ActionsEmulator
from sandbox.actions.server import encode_jit


async def _checks_per_job(runners: int) -> int:
    """Waiter checks for one job's whole life (enqueue, bind, start, finish) with `runners`
    idle simulated runners waiting."""
    async with ActionsEmulator(require_acquire=False) as actions:
        state = actions.state
        scale_set = state.create_scale_set(
            name="cost", runner_group_id=1, labels=[], runner_setting={}
        )
        tasks = []
        for index in range(runners):
            _, files = state.generate_jit_config(
                scale_set.id, name=f"runner-{index}", work_folder=""
            )
            tasks.append(asyncio.create_task(actions.runtime.run_runner(encode_jit(files))))
        await state.wait_for(
            lambda: sum(1 for r in state.runners.values() if r.online) == runners, within=10
        )
        before = state.data.checks
        job_id = actions.enqueue_job(labels=["cost"])
        await state.wait_for(lambda: state.jobs[job_id].state == "started", within=10)
        actions.complete_job(job_id)
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        checks = state.data.checks - before
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return checks


async def test_a_job_costs_the_same_checks_with_10_or_200_runners_waiting() -> None:
    few, many = await _checks_per_job(10), await _checks_per_job(200)
    assert few == many, (few, many)


async def test_a_runner_name_is_checked_unique_by_lookup() -> None:
    async with ActionsEmulator() as actions:
        state = actions.state
        scale_set = state.create_scale_set(
            name="s", runner_group_id=1, labels=[], runner_setting={}
        )
        state.generate_jit_config(scale_set.id, name="Runner-A", work_folder="")
        assert [r.name for r in state.runners_named("runner-a")] == ["Runner-A"]
        del state.runners[next(iter(state.runners))]
        assert state.runners_named("runner-a") == []
        state.generate_jit_config(scale_set.id, name="runner-a", work_folder="")
