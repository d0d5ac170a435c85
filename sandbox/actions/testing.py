"""pytest plugin: the `actions` fixture, a running ActionsEmulator with test-sized timeouts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from sandbox.actions.emulator import ActionsEmulator

# Long enough that a poll racing an enqueue sees the message, short enough that an idle
# listener loop turns over quickly in tests.
TEST_LONG_POLL_TIMEOUT = 0.5


@pytest_asyncio.fixture
async def actions() -> AsyncIterator[ActionsEmulator]:
    async with ActionsEmulator(long_poll_timeout=TEST_LONG_POLL_TIMEOUT) as emulator:
        yield emulator
