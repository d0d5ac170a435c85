"""Time as the runtime sees it, so tests can drive backoffs and leases without sleeping."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until `now() >= deadline`."""
        ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(deadline - time.monotonic(), 0.0))


class FakeClock:
    """A clock that moves only when `advance` is called; sleepers wake when their time comes."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._changed = asyncio.Condition()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._now >= deadline)

    async def advance(self, seconds: float) -> None:
        async with self._changed:
            self._now += seconds
            self._changed.notify_all()
