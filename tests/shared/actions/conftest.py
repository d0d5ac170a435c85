"""Fixtures: clients of the `actions` emulator with recorded (not slept) retry waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    MessageSession,
    PersonalAccessToken,
    RetryPolicy,
    RunnerScaleSet,
)

ClientFactory = Callable[..., ActionsClient]


class RecordedSleeps:
    """A RetryPolicy `sleep` that records each wait and only yields to the loop."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def sleeps() -> RecordedSleeps:
    return RecordedSleeps()


@pytest_asyncio.fixture
async def make_client(
    actions: ActionsEmulator, sleeps: RecordedSleeps
) -> AsyncIterator[ClientFactory]:
    """Builds clients (PAT on the emulator's org, no proxy variables) closed after the test."""
    clients: list[ActionsClient] = []

    def make(**overrides: Any) -> ActionsClient:
        kwargs: dict[str, Any] = {
            "config_url": actions.config_url(),
            "credentials": PersonalAccessToken(actions.add_pat()),
            "retry": RetryPolicy(sleep=sleeps),
            "env": {},
            "request_timeout": 10.0,
            "long_poll_timeout": 10.0,
        }
        kwargs.update(overrides)
        client = ActionsClient(**kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def client(make_client: ClientFactory) -> ActionsClient:
    return make_client()


@pytest_asyncio.fixture
async def scale_set(client: ActionsClient) -> RunnerScaleSet:
    return await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))


@pytest_asyncio.fixture
async def session(
    client: ActionsClient, scale_set: RunnerScaleSet
) -> AsyncIterator[MessageSession]:
    async with await client.open_message_session(scale_set.id, owner="listener-0") as opened:
        yield opened


async def until(predicate: Callable[[], bool], *, within: float = 5.0) -> None:
    """Poll `predicate` (for state that signals no event) until it holds or `within` passes."""
    step = 0.01
    for _ in range(int(within / step)):
        if predicate():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"condition not met within {within} s")


def endpoints(gh: ActionsEmulator, since: int = 0) -> list[str]:
    """The endpoint names the emulator served, in order, from request number `since`."""
    return [r.endpoint for r in gh.state.requests[since:]]
