"""Faults where ARC's listener exits: the listener recovers in process and loses no JobStarted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Literal

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.typedefs import JSONDict
from tests.listener.conftest import (
    DEADLINE,
    RUNNER_SET,
    Cluster,
    GitHub,
    RunningListener,
    StartListener,
    eventually,
)
from tests.listener.test_e2e_job_started import recorded, start_job_on


async def scaled_to(cluster: Cluster, replicas: int) -> None:
    async def done() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == replicas

    await eventually(done, what=f"replicas={replicas}")


async def session_open(github: GitHub, *, sessions: int = 1) -> None:
    async def opened() -> bool:
        return github.emulator.state.count("create_session", status=200) >= sessions

    await eventually(opened, what=f"{sessions} message session(s) created")


def still_running(running: RunningListener) -> bool:
    return not running.task.done()


@pytest.mark.parametrize(
    "endpoint",
    ["registration_token", "create_session", "get_message", "delete_message", "acquire_jobs"],
)
async def test_actions_5xx_burst_longer_than_the_http_retries(
    cluster: Cluster, github: GitHub, start_listener: StartListener, endpoint: str
) -> None:
    # Two and a half times what the client's own HTTP retries absorb (5 attempts).
    fault = github.emulator.faults.inject(endpoint, status=503, count=12)
    running = await start_listener()
    github.enqueue(2)
    await scaled_to(cluster, 2)
    assert fault.hits == 12
    assert still_running(running)


@pytest.mark.parametrize(
    ("kind", "refresh_refused"), [("message_queue", False), (None, True)], ids=["mq", "all"]
)
async def test_expired_tokens_are_renewed_without_a_new_session(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    kind: Literal["message_queue"] | None,
    refresh_refused: bool,
) -> None:
    running = await start_listener()
    await session_open(github)
    github.emulator.faults.expire_tokens(kind)
    github.enqueue(3)
    await scaled_to(cluster, 3)
    state = github.emulator.state
    assert state.count(status=401) >= 1
    # With the admin token gone too, the session refresh itself is refused once first.
    assert (state.count("refresh_session", status=401) == 1) is refresh_refused
    assert state.count("refresh_session", status=200) >= 1
    assert state.count("create_session", status=200) == 1
    assert still_running(running)


async def test_session_conflict_waits_for_the_old_session(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    old = await github.client.create_session(github.scale_set_id, owner="old-listener-pod")
    running = await start_listener(session_conflict_timeout_seconds=30)

    async def refused_twice() -> bool:
        return github.emulator.state.count("create_session", status=409) >= 2

    await eventually(refused_twice, what="two 409s on session creation")
    await github.client.delete_session(github.scale_set_id, old.session_id)
    await session_open(github, sessions=2)
    github.enqueue(1)
    await scaled_to(cluster, 1)
    assert still_running(running)


async def test_session_conflict_outliving_its_wait_exits_1(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await github.client.create_session(github.scale_set_id, owner="old-listener-pod")
    running = await start_listener(session_conflict_timeout_seconds=0.3)
    assert await running.task == 1
    assert github.emulator.state.count("create_session", status=409) >= 2


async def test_evicted_session_is_replaced(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    running = await start_listener()
    await session_open(github)
    assert github.emulator.faults.evict_sessions() == 1
    github.enqueue(2)
    await scaled_to(cluster, 2)
    await session_open(github, sessions=2)
    assert still_running(running)


async def test_kubernetes_500s_on_the_runner_set_are_retried(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    cluster.kube.faults.inject(verb="patch", resource="ephemeralrunnersets", status=500, count=15)
    running = await start_listener()
    github.enqueue(2)
    await scaled_to(cluster, 2)
    assert cluster.kube.requests.count(resource="ephemeralrunnersets", code=500) == 15
    assert still_running(running)


@pytest.mark.parametrize(
    ("verb", "subresource"), [("get", ""), ("patch", "status")], ids=["get", "patch-status"]
)
async def test_kubernetes_500s_lose_no_job_started(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    verb: str,
    subresource: str,
) -> None:
    await cluster.create_runner("runner-a", phase="Pending")
    # More failures than fit in one retry window: the JobStarted waits for the next turn.
    cluster.kube.faults.inject(
        verb=verb,
        resource="ephemeralrunners",
        subresource=subresource or "*",
        status=500,
        count=25,
    )
    running = await start_listener()
    await start_job_on(github, "runner-a")
    status = await recorded(cluster, "runner-a")
    assert status["phase"] == "Running"
    assert cluster.kube.requests.count(resource="ephemeralrunners", code=500) == 25
    assert still_running(running)


async def test_kubernetes_timeouts_lose_no_job_started(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await cluster.create_runner("runner-a", phase="Pending")
    # Slower than the listener's request timeout (0.5 s here).
    slow = cluster.kube.faults.latency(2.0, verb="get", resource="ephemeralrunners")
    running = await start_listener(kube_request_timeout_seconds=0.5)
    await start_job_on(github, "runner-a")

    async def timed_out_twice() -> bool:
        return (
            cluster.kube.requests.count(
                verb="get", resource="ephemeralrunners", user=cluster.listener_user
            )
            >= 2
        )

    await eventually(timed_out_twice, what="two timed-out GETs of the runner")
    cluster.kube.faults.remove(slow)
    status = await recorded(cluster, "runner-a")
    assert status["phase"] == "Running"
    assert still_running(running)


@pytest.mark.parametrize("body", ['{"messageType": "RunnerScaleSetJobMessages"}', "[]", "not json"])
async def test_undecodable_message_is_polled_again(
    cluster: Cluster, github: GitHub, start_listener: StartListener, body: str
) -> None:
    fault = github.emulator.faults.inject("get_message", status=200, body=body, count=2)
    running = await start_listener()
    github.enqueue(2)
    await scaled_to(cluster, 2)
    assert fault.hits == 2
    assert still_running(running)


async def test_scale_set_deleted_on_the_service_is_registered_again(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    running = await start_listener(runner_scale_set_id=0)
    await session_open(github)
    github.emulator.faults.evict_sessions()
    await github.client.delete_runner_scale_set(github.scale_set_id)
    await session_open(github, sessions=2)
    github.enqueue(2)
    await scaled_to(cluster, 2)
    assert github.emulator.state.count("create_scale_set", status=200) == 2
    # The new id reaches the runners' spec too.
    [new_id] = [i for i in github.emulator.state.scale_sets if i != github.scale_set_id]
    spec = await cluster.runner_set_spec()
    assert spec["ephemeralRunnerSpec"]["runnerScaleSetId"] == new_id
    assert still_running(running)


async def first_spec_change(cluster: Cluster, resource_version: str) -> JSONDict:
    """The EphemeralRunnerSet's spec in its first change after `resource_version`, watched over
    the API."""
    events = cluster.objects.watch(
        EPHEMERAL_RUNNER_SET,
        cluster.namespace,
        resource_version=resource_version,
        timeout_seconds=60,
        inactivity_timeout=DEADLINE,
    )
    async with contextlib.aclosing(events):
        async for event in events:
            if event["type"] == "MODIFIED" and event["object"]["metadata"]["name"] == RUNNER_SET:
                spec: JSONDict = event["object"]["spec"]
                return spec
    pytest.fail("the watch ended without a change of the set")


async def test_session_without_statistics_is_refused_and_publishes_nothing(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """Two jobs are assigned when a listener restarts and its first session comes without
    statistics: publishing from it would be min_runners (0) with patch id 0, which lets the
    controller remove the runners those jobs need. The listener refuses that session and
    publishes only from the next one."""
    first = await start_listener()
    github.enqueue(2, duration=60.0)
    await scaled_to(cluster, 2)
    assert await first.stop() == 0
    runner_set = await cluster.objects.get(EPHEMERAL_RUNNER_SET, cluster.namespace, RUNNER_SET)
    no_statistics = {
        "sessionId": str(uuid.uuid4()),
        "ownerName": "listener",
        "messageQueueUrl": github.emulator.config_url() + "/no-such-queue",
        "messageQueueAccessToken": "not-a-token",
    }
    fault = github.emulator.faults.inject(
        "create_session", status=200, body=json.dumps(no_statistics), count=1
    )
    change = asyncio.create_task(
        first_spec_change(cluster, runner_set["metadata"]["resourceVersion"])
    )
    second = await start_listener()
    spec = await asyncio.wait_for(change, DEADLINE)
    assert fault.hits == 1
    assert (spec["replicas"], spec["patchID"]) == (2, 0)
    assert github.emulator.state.count("create_session", status=200) == 3
    assert still_running(second)


async def test_after_a_failed_publication_the_next_batch_is_published(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch whose count stands is not published (docs/listener.md, "Replicas and the patch
    id"), but only while the set is known to hold that count: after a publication that failed
    (here the completed job's, the one a refill needs) the next batch is published, even a job
    offered at maxRunners. Without it the set would wait for the next long poll to time out
    (held here beyond the test's deadline, so that only a message batch can publish)."""
    github.emulator.long_poll_timeout = 60.0
    await cluster.create_runner("runner-a", phase="Pending")
    await start_listener(max_runners=1, long_poll_timeout_seconds=50)
    [first] = github.enqueue(duration=0.2)

    async def patch_id() -> int:
        return int((await cluster.runner_set_spec()).get("patchID", 0))

    async def published_for_the_first() -> bool:
        return await patch_id() > 0

    await eventually(published_for_the_first, what="the first job published")
    github.enqueue(duration=60.0)  # offered at maxRunners: not published
    refused = cluster.kube.faults.inject(
        verb="patch", resource="ephemeralrunnersets", status=500, count=1000
    )
    before = await patch_id()
    await github.start_runner("runner-a")

    async def failed() -> bool:
        done = github.emulator.state.jobs[first].state == "completed"
        return done and any("could not publish" in r.getMessage() for r in caplog.records)

    await eventually(failed, what="the completed job's publication failed")
    cluster.kube.faults.remove(refused)
    github.enqueue(duration=60.0)  # another offer at maxRunners

    async def published_again() -> bool:
        return await patch_id() > before

    await eventually(published_again, what="the next batch published")
    assert (await cluster.runner_set_spec())["replicas"] == 1
