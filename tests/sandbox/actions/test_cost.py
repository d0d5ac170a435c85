"""What one mutation costs the Actions emulator, counted (not timed): with many simulated runners
waiting for a job, a mutation checks the waiters it concerns, not every waiting runner
(docs/sandbox-actions.md, Inspection)."""

from __future__ import annotations

import asyncio

from sandbox.actions import ActionsEmulator
from sandbox.actions.server import encode_jit
from sandbox.actions.state.service import ServiceState


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


def _scanned(state: ServiceState, scale_set_id: int) -> dict[str, int]:
    """The statistics by walking every job and runner, as the emulator once computed them."""
    jobs = [j for j in state.jobs.values() if j.scale_set_id == scale_set_id]
    runners = [r for r in state.runners.values() if r.scale_set_id == scale_set_id]
    busy = sum(1 for r in runners if r.job_id is not None)
    return {
        "totalAvailableJobs": sum(1 for j in jobs if j.state == "available"),
        "totalAcquiredJobs": sum(1 for j in jobs if j.state == "acquired"),
        "totalAssignedJobs": sum(1 for j in jobs if j.state in ("assigned", "started")),
        "totalRunningJobs": sum(1 for j in jobs if j.state == "started"),
        "totalRegisteredRunners": len(runners),
        "totalBusyRunners": busy,
        "totalIdleRunners": len(runners) - busy,
    }


async def test_statistics_from_tallies_match_a_walk_over_every_job_and_runner() -> None:
    """Offers, acquisitions, bindings, a runner gone offline, a re-offer, completions, a runner
    removed and a scale set deleted: after each, the kept tallies give what a walk gives."""
    async with ActionsEmulator(require_acquire=True) as actions:
        state = actions.state
        sets = [
            state.create_scale_set(name=n, runner_group_id=1, labels=[], runner_setting={}).id
            for n in ("a", "b")
        ]

        def check() -> None:
            for scale_set_id in sets:
                if scale_set_id in state.scale_sets:
                    assert state.statistics(scale_set_id) == _scanned(state, scale_set_id)

        runners = []
        for index in range(4):
            runner, _ = state.generate_jit_config(sets[0], name=f"r{index}", work_folder="")
            runners.append(runner)
        jobs = [actions.enqueue_job(labels=["a"]) for _ in range(3)]
        jobs.append(actions.enqueue_job(labels=["b"]))
        check()
        state.acquire_jobs(sets[0], jobs[:3])
        check()
        for runner in runners[:3]:
            state.runner_online(runner.id, runner.token)
        check()
        state.runner_offline(runners[0].id)
        check()
        bound = next(j for j in jobs[:3] if state.jobs[j].runner_id is not None)
        state.start_job(bound)
        check()
        state.finish_job(bound)
        check()
        other = next(j for j in jobs[:3] if state.jobs[j].state == "assigned")
        actions.reoffer_job(other)
        check()
        state.remove_runner(runners[3].id)
        check()
        state.delete_scale_set(sets[0])
        check()
