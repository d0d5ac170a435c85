"""A batch's JobStarted messages are written side by side (bounded, one runner's in order), and
the set patch does not wait for them (docs/listener.md, "JobStarted")."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import pytest

from sandbox.actions.emulator import ActionsEmulator
from tests.listener.conftest import (
    Cluster,
    Collector,
    GitHub,
    StartListener,
    eventually,
)

RUNNERS = 5
# Holds each runner GET on the server so that writes sent side by side are in flight together;
# the assertions count overlaps and conflicts, not time.
GET_HOLD_SECONDS = 0.3
# Long polls that outlast each test (and the listener's client timeout, which is above them),
# so no empty poll ends while Kubernetes requests are held: its publication would be held too
# and block the loop before the JobStarted batch (the 0.5 s of the shared fixture made
# test_the_set_patch_does_not_wait_for_the_runner_writes fail about once in six runs under load).
LONG_POLL_SECONDS = 30.0


@pytest.fixture
async def actions() -> AsyncIterator[ActionsEmulator]:
    async with ActionsEmulator(long_poll_timeout=LONG_POLL_SECONDS) as emulator:
        yield emulator


async def jobs_started_while_away(cluster: Cluster, github: GitHub, start: StartListener) -> None:
    """RUNNERS jobs acquired by a first listener, then started by their runners while no
    listener polls, so the next listener receives every JobStarted in one batch."""
    names = [f"runner-{index}" for index in range(RUNNERS)]
    for name in names:
        await cluster.create_runner(name, phase="Pending")
    first = await start()
    request_ids = github.enqueue(RUNNERS, duration=60.0)
    state = github.emulator.state
    queue = state.queues[github.scale_set_id]

    async def acquired() -> bool:
        return all(state.jobs[r].state == "assigned" for r in request_ids) and not (
            queue.pending or queue.messages
        )

    await eventually(acquired, what="every job acquired and acknowledged")
    assert await first.stop() == 0
    for name in names:
        await github.start_runner(name)

    async def started() -> bool:
        kinds = [str(event["messageType"]) for event in queue.pending]
        return kinds.count("JobStarted") == RUNNERS

    await eventually(started, what="every JobStarted queued")


def max_overlap(intervals: list[tuple[int, int]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = most = 0
    for _, step in edges:
        open_now += step
        most = max(most, open_now)
    return most


async def test_a_batch_is_written_side_by_side_up_to_the_bound_and_in_order_per_runner(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    otlp_collector: Collector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without concurrency the runner GETs never overlap (1); without the bound all five would.
    A JobStarted delivered twice in the batch for one runner is applied after the first, not
    beside it: beside it both would read the same resourceVersion and one patch would get 409."""
    await jobs_started_while_away(cluster, github, start_listener)
    queue = github.emulator.state.queues[github.scale_set_id]
    queue.pending.append(copy.deepcopy(queue.pending[0]))
    cluster.kube.faults.latency(GET_HOLD_SECONDS, verb="get", resource="ephemeralrunners")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    cluster.kube.requests.reset()
    running = await start_listener(job_started_concurrency=2)

    async def all_running() -> bool:
        runners = [await cluster.runner(f"runner-{index}") for index in range(RUNNERS)]
        return all(runner["status"].get("phase") == "Running" for runner in runners)

    await eventually(all_running, what="every runner Running")

    async def six_reads() -> bool:
        return cluster.kube.requests.count(verb="get", resource="ephemeralrunners") == RUNNERS + 1

    await eventually(six_reads, what="the duplicate JobStarted read")
    assert await running.stop() == 0
    gets = [
        (span.start_time_unix_nano, span.end_time_unix_nano)
        for span in otlp_collector.spans()
        if span.name == "kube get ephemeralrunners"
    ]
    assert len(gets) == RUNNERS + 1
    assert max_overlap(gets) == 2
    requests = cluster.kube.requests
    assert requests.count(verb="patch", subresource="status", code=200) == RUNNERS
    assert requests.count(verb="patch", subresource="status", code=409) == 0


async def test_the_set_patch_does_not_wait_for_the_runner_writes(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """With every Kubernetes request held, the batch's set patch is in flight beside the runner
    GET (two held requests); published after the JobStarted write, only the GET would be."""
    await cluster.create_runner("runner-a", phase="Pending")
    # A request timeout past the wait below: a GET sent again after a timeout would be a second
    # held request too.
    # At max_runners = min_runners the set rests at patch id 0 with the job assigned, so the
    # JobStarted batch is published (a new id keeps the controller from removing the runner
    # whose job is not written yet); a batch of JobStarted alone under a served non-zero id is
    # not (docs/listener.md, "Replicas and the patch id").
    running = await start_listener(
        job_started_concurrency=1,
        kube_request_timeout_seconds=60,
        long_poll_timeout_seconds=2 * LONG_POLL_SECONDS,
        min_runners=1,
        max_runners=1,
    )
    [request_id] = github.enqueue(duration=60.0)
    state = github.emulator.state
    queue = state.queues[github.scale_set_id]

    async def acquired_and_polling() -> bool:
        # Polling again: the batch that acquired the job has published, so no set patch of it
        # is still to come (held, it would block the loop before the JobStarted batch).
        polling = any(session.polls_in_flight for session in state.sessions.values())
        acknowledged = not (queue.pending or queue.messages)
        return state.jobs[request_id].state == "assigned" and acknowledged and polling

    await eventually(acquired_and_polling, what="the job acquired, acknowledged, polling again")
    cluster.kube.faults.pause()
    try:
        await github.start_runner("runner-a")

        async def held_side_by_side() -> bool:
            return cluster.kube.faults.held == 2

        await eventually(held_side_by_side, what="the set patch beside the runner GET")
    finally:
        cluster.kube.faults.resume()

    async def promoted() -> bool:
        status = (await cluster.runner("runner-a"))["status"]
        return bool(status.get("phase") == "Running")

    await eventually(promoted, what="runner-a Running once the requests are answered")
    assert not running.task.done()
