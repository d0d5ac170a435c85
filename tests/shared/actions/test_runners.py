"""JIT configs and the runner registry: get, by name, remove (idle, busy, gone)."""

from __future__ import annotations

import asyncio

import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsServerError,
    JobAvailable,
    JobStillRunning,
    MessageSession,
    RunnerExists,
    RunnerNotFound,
    RunnerScaleSet,
    ScaleSetNotFound,
)

from .conftest import RecordedSleeps


async def test_jit_config(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    config = await client.generate_jit_runner_config(
        scale_set.id, name="runner-1", work_folder="/w"
    )
    assert (config.runner.name, config.runner.runner_scale_set_id) == ("runner-1", scale_set.id)
    assert config.runner.id > 0
    assert config.encoded_jit_config.get_secret_value()
    assert actions.state.runners[config.runner.id].work_folder == "/w"


async def test_jit_config_duplicate_name_is_runner_exists(
    client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    with pytest.raises(RunnerExists, match="AgentExistsException"):
        await client.generate_jit_runner_config(scale_set.id, name="runner-1")


async def test_jit_config_unknown_scale_set(client: ActionsClient) -> None:
    with pytest.raises(ScaleSetNotFound):
        await client.generate_jit_runner_config(999, name="runner-1")


async def test_jit_config_503_retried_then_gives_up(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    sleeps: RecordedSleeps,
) -> None:
    fault = actions.faults.inject("generate_jit_config", status=503)
    with pytest.raises(ActionsServerError, match="after 5 attempts"):
        await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    assert fault.hits == 5
    assert len(sleeps.waits) == 4


async def test_get_runner(client: ActionsClient, scale_set: RunnerScaleSet) -> None:
    config = await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    runner = await client.get_runner(config.runner.id)
    assert (runner.id, runner.name, runner.runner_scale_set_id) == (
        config.runner.id,
        "runner-1",
        scale_set.id,
    )


async def test_get_runner_missing(client: ActionsClient) -> None:
    with pytest.raises(RunnerNotFound):
        await client.get_runner(424242)


async def test_get_runner_by_name(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    config = await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    runner = await client.get_runner_by_name("runner-1")
    assert runner is not None
    assert runner.id == config.runner.id
    assert actions.state.requests[-1].query == {
        "agentName": "runner-1",
        "api-version": "6.0-preview",
    }


async def test_get_runner_by_name_missing_is_none(client: ActionsClient) -> None:
    assert await client.get_runner_by_name("nobody") is None


async def test_remove_idle_runner(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    config = await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    await client.remove_runner(config.runner.id)
    assert actions.state.requests[-1].status == 204
    assert await client.get_runner_by_name("runner-1") is None


async def test_remove_missing_runner(client: ActionsClient) -> None:
    with pytest.raises(RunnerNotFound, match="AgentNotFoundException"):
        await client.remove_runner(424242)


async def test_remove_busy_runner_is_job_still_running(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
) -> None:
    config = await client.generate_jit_runner_config(scale_set.id, name="runner-1")
    request_id = actions.enqueue_job(labels=["arc"], duration=60.0)
    message = await session.get_message(max_capacity=1)
    assert message is not None
    await session.delete_message(message.message_id)
    assert await session.acquire_jobs(
        [j.runner_request_id for j in message.jobs if isinstance(j, JobAvailable)]
    ) == [request_id]
    runner_task = asyncio.create_task(
        actions.runtime.run_runner(config.encoded_jit_config.get_secret_value())
    )
    runner = actions.state.runners[config.runner.id]
    await actions.state.wait_for(lambda: runner.job_id is not None, within=5.0)
    with pytest.raises(JobStillRunning):
        await client.remove_runner(config.runner.id)
    actions.cancel_job(request_id)
    assert await runner_task == 0
