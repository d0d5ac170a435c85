"""The times the service's records carry beyond the protocol's own: a job's first delivery to a
poll and a runner's first connection (docs/sandbox-actions.md#inspection-ghstate), which the
queue-time benchmark reads."""

from __future__ import annotations

import asyncio
import time

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.test_simulated_runner import run_pod
from tests.sandbox.actions.wire import Service, job_messages


async def test_a_job_is_stamped_when_a_poll_first_receives_it(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    first, second = (actions.enqueue_job(labels=["arc"]) for _ in range(2))
    jobs = actions.state.jobs
    undelivered = (jobs[first].delivered_time, jobs[second].delivered_time)

    before = time.time()
    available = (await service.get_message(session)).json
    after = time.time()
    stamped = jobs[first].delivered_time

    assert undelivered == (None, None)
    assert [j["runnerRequestId"] for j in job_messages(available)] == [first, second]
    assert stamped is not None
    assert before <= stamped <= after
    assert jobs[second].delivered_time == stamped


async def test_redelivery_and_later_messages_keep_the_first_delivery(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    available = (await service.get_message(session)).json
    stamped = actions.state.jobs[request_id].delivered_time

    again = (await service.get_message(session)).json
    await service.delete_message(session, available["messageId"])
    await service.acquire(session, scale_set["id"], [request_id])
    assigned = (await service.get_message(session, last_message_id=available["messageId"])).json

    assert again["messageId"] == available["messageId"]
    assert [j["messageType"] for j in job_messages(assigned)] == ["JobAssigned"]
    assert actions.state.jobs[request_id].delivered_time == stamped


async def test_a_runner_is_stamped_when_it_first_connects(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set = await service.create_scale_set("arc")
    jit = (await service.generate_jit(scale_set["id"], "arc-runner-abc")).json
    runner = actions.state.runners[jit["runner"]["id"]]
    registered_only = runner.online_time

    before = time.time()
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    await actions.state.wait_for(lambda: runner.online, within=5)
    after = time.time()
    pod.cancel()

    assert registered_only is None
    assert runner.online_time is not None
    assert before <= runner.online_time <= after
