"""End-to-end: a job through a simulated runner, as the listener sees it; request headers."""

from __future__ import annotations

import asyncio
import json

import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    JobAvailable,
    JobCompleted,
    JobMessage,
    JobStarted,
    MessageSession,
    PersonalAccessToken,
    RetryPolicy,
    RunnerScaleSet,
    Statistics,
    SystemInfo,
)

from .conftest import RecordedSleeps


async def _drain_until_completed(
    session: MessageSession, *, acquire: bool
) -> tuple[list[JobMessage], Statistics | None]:
    """The listener's loop: poll, ack first, acquire what is offered, until a job completes."""
    seen: list[JobMessage] = []
    last_id, statistics = 0, None
    for _ in range(40):
        message = await session.get_message(last_message_id=last_id, max_capacity=1)
        if message is None:
            continue
        last_id, statistics = message.message_id, message.statistics
        await session.delete_message(message.message_id)
        offered = [j.runner_request_id for j in message.jobs if isinstance(j, JobAvailable)]
        if acquire and offered:
            assert await session.acquire_jobs(offered) == offered
        seen.extend(message.jobs)
        if any(isinstance(j, JobCompleted) for j in message.jobs):
            return seen, statistics
    raise AssertionError(f"no JobCompleted after 40 polls: {[j.message_type for j in seen]}")


@pytest.mark.parametrize(
    ("require_acquire", "expected"),
    [
        (True, ["JobAvailable", "JobAssigned", "JobStarted", "JobCompleted"]),
        (False, ["JobAssigned", "JobStarted", "JobCompleted"]),
    ],
)
async def test_job_from_enqueue_to_completion(
    sleeps: RecordedSleeps, require_acquire: bool, expected: list[str]
) -> None:
    async with (
        ActionsEmulator(long_poll_timeout=0.5, require_acquire=require_acquire) as gh,
        ActionsClient(
            config_url=gh.config_url(repo="app"),
            credentials=PersonalAccessToken(gh.add_pat()),
            retry=RetryPolicy(sleep=sleeps),
            env={},
        ) as client,
    ):
        made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
        jit = await client.generate_jit_runner_config(made.id, name="runner-1")
        runner = asyncio.create_task(
            gh.runtime.run_runner(jit.encoded_jit_config.get_secret_value())
        )
        async with await client.open_message_session(made.id, owner="x") as session:
            request_id = gh.enqueue_job(labels=["arc"], result="failed", repository="octo/app")
            seen, statistics = await _drain_until_completed(session, acquire=require_acquire)
        assert await runner == 0
    assert [j.message_type for j in seen] == expected
    assert {j.runner_request_id for j in seen} == {request_id}
    started = next(j for j in seen if isinstance(j, JobStarted))
    completed = next(j for j in seen if isinstance(j, JobCompleted))
    assert (started.runner_name, started.owner_name, started.repository_name) == (
        "runner-1",
        "octo",
        "app",
    )
    assert started.runner_assign_time is not None
    assert completed.result == "failed"
    assert completed.finish_time is not None
    assert statistics is not None
    assert (statistics.total_assigned_jobs, statistics.total_running_jobs) == (0, 0)


async def test_every_request_carries_the_user_agent(
    actions: ActionsEmulator, client: ActionsClient, session: MessageSession
) -> None:
    await session.get_message(max_capacity=1)
    client.set_system_info(SystemInfo(scale_set_id=7, subsystem="ghalistener"))
    await client.get_runner_group_by_name("default")
    agents = [json.loads(r.headers["User-Agent"]) for r in actions.state.requests]
    assert {a["kind"] for a in agents} == {"scaleset"}
    assert [a["scale_set_id"] for a in agents[-1:]] == [7]
    assert agents[-1]["subsystem"] == "ghalistener"
    assert {a["scale_set_id"] for a in agents[:-1]} == {0}


async def test_admin_requests_send_json_content_type(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    await client.get_runner_by_name("x")
    record = actions.state.requests[-1]
    assert record.method == "GET"
    assert record.headers["Content-Type"] == "application/json"
