"""Retries: which failures, how many attempts, backoff and Retry-After, timeouts, cancellation."""

from __future__ import annotations

import asyncio
import socket
import time
from email.utils import formatdate

import aiohttp
import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsConnectionError,
    ActionsError,
    ActionsServerError,
    MessageSession,
    PersonalAccessToken,
    RetryPolicy,
    RunnerScaleSet,
)

from .conftest import ClientFactory, RecordedSleeps, until


async def _warm(client: ActionsClient) -> None:
    """Fetch the admin token so faults and short timeouts hit only the call under test."""
    await client.get_runner_group_by_name("default")


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
async def test_retryable_status_tried_five_times(
    actions: ActionsEmulator, client: ActionsClient, sleeps: RecordedSleeps, status: int
) -> None:
    await _warm(client)
    fault = actions.faults.inject("get_runner_group", status=status)
    with pytest.raises(ActionsServerError, match="after 5 attempts") as caught:
        await client.get_runner_group_by_name("default")
    assert fault.hits == 5
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]
    assert caught.value.status == status
    assert caught.value.retryable


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 501])
async def test_other_status_not_retried(
    actions: ActionsEmulator, client: ActionsClient, sleeps: RecordedSleeps, status: int
) -> None:
    await _warm(client)
    fault = actions.faults.inject("get_runner_group", status=status, count=2)
    with pytest.raises(ActionsError):
        await client.get_runner_group_by_name("default")
    # A 401 is repeated once after renewing the admin token; nothing else is repeated.
    assert fault.hits == (2 if status == 401 else 1)
    assert sleeps.waits == []


async def test_recovers_after_transient_failures(
    actions: ActionsEmulator, client: ActionsClient, sleeps: RecordedSleeps
) -> None:
    await _warm(client)
    actions.faults.inject("get_runner_group", status=503, count=2)
    group = await client.get_runner_group_by_name("default")
    assert group.id == 1
    assert sleeps.waits == [1.0, 2.0]


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_seconds_honoured(
    actions: ActionsEmulator,
    client: ActionsClient,
    sleeps: RecordedSleeps,
    status: int,
) -> None:
    await _warm(client)
    fault = actions.faults.inject("get_runner_group", status=status, count=2, retry_after=7)
    await client.get_runner_group_by_name("default")
    assert fault.hits == 2
    assert sleeps.waits == [7.0, 7.0]


async def test_retry_after_http_date_honoured(
    actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client()
    await _warm(client)
    when = formatdate(time.time() + 120, usegmt=True)
    actions.faults.inject("get_runner_group", status=429, count=1, retry_after=when)
    await client.get_runner_group_by_name("default")
    assert len(sleeps.waits) == 1
    assert 100 < sleeps.waits[0] <= 120


async def test_retry_after_is_capped(
    actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client(retry=RetryPolicy(retry_after_max=20.0, sleep=sleeps))
    await _warm(client)
    actions.faults.inject("get_runner_group", status=503, count=1, retry_after=86400)
    await client.get_runner_group_by_name("default")
    assert sleeps.waits == [20.0]


async def test_backoff_is_capped_and_attempts_configurable(
    actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client(retry=RetryPolicy(attempts=7, wait_min=0.5, wait_max=5.0, sleep=sleeps))
    await _warm(client)
    fault = actions.faults.inject("get_runner_group", status=502)
    with pytest.raises(ActionsServerError, match="after 7 attempts"):
        await client.get_runner_group_by_name("default")
    assert fault.hits == 7
    assert sleeps.waits == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


async def test_post_is_retried_and_sent_again(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    await _warm(client)
    fault = actions.faults.inject("create_scale_set", status=503, count=1)
    made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
    assert fault.hits == 1
    assert actions.state.count("create_scale_set", status=200) == 1
    assert list(actions.state.scale_sets) == [made.id]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_connection_refused_is_retried_then_connection_error(
    make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client(
        config_url=f"http://127.0.0.1:{_closed_port()}/org",
        credentials=PersonalAccessToken("ghp_unused"),
    )
    with pytest.raises(ActionsConnectionError, match="after 5 attempt") as caught:
        await client.get_runner_group_by_name("default")
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)
    assert caught.value.retryable
    assert len(sleeps.waits) == 4


async def test_slow_answer_times_out_and_is_retried(
    actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client()
    await _warm(client)
    client.transport.request_timeout = 2.0
    fault = actions.faults.inject("get_runner_group", latency=30.0, count=1)
    group = await client.get_runner_group_by_name("default")
    assert group.id == 1
    assert fault.hits == 1
    assert sleeps.waits == [1.0]


async def test_every_attempt_timing_out_is_connection_error(
    actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client(retry=RetryPolicy(attempts=2, sleep=sleeps))
    await _warm(client)
    client.transport.request_timeout = 0.2
    actions.faults.inject("get_runner_group", latency=30.0)
    with pytest.raises(ActionsConnectionError) as caught:
        await client.get_runner_group_by_name("default")
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert len(sleeps.waits) == 1


async def test_long_poll_has_its_own_timeout(
    make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    async with ActionsEmulator(long_poll_timeout=2.0) as gh:
        client = make_client(
            config_url=gh.config_url(),
            credentials=PersonalAccessToken(gh.add_pat()),
            long_poll_timeout=30.0,
        )
        made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
        async with await client.open_message_session(made.id, owner="x") as session:
            # Shorter than the 2 s the emulator holds the poll: only the long-poll timeout fits.
            client.transport.request_timeout = 1.0
            assert await session.get_message(max_capacity=1) is None
            client.transport.request_timeout = 10.0
        assert gh.state.count("get_message") == 1
        assert sleeps.waits == []


async def test_cancelled_long_poll_is_not_retried(
    actions: ActionsEmulator, session: MessageSession, sleeps: RecordedSleeps
) -> None:
    live = actions.state.sessions[session.session_id]
    poll = asyncio.create_task(session.get_message(max_capacity=1))
    await until(lambda: live.polls_in_flight == 1)
    poll.cancel()
    with pytest.raises(asyncio.CancelledError):
        await poll
    assert sleeps.waits == []
