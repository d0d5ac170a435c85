"""Fixtures for the Actions emulator tests: a raw aiohttp session and an authenticated service."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import Service, authenticate


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


@pytest_asyncio.fixture
async def service(actions: ActionsEmulator, http: aiohttp.ClientSession) -> Service:
    return await authenticate(actions, http)
