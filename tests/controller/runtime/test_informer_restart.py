"""An informer through a control-plane restart: it waits as long as each 429 `Retry-After`
asks, on its clock, then re-lists on the 410 and converges."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

from controller.runtime import FakeClock, Informer
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from tests.controller.runtime.conftest import eventually
from tests.controller.runtime.test_informer import FAST, churn, converge, running, seeded

__all__ = ["seeded"]


class RecordingClock(FakeClock):
    """A fake clock that remembers how long each sleeper asked to sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await super().sleep(seconds)


async def test_an_informer_waits_out_a_restart_as_the_server_asks_and_converges(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    clock = RecordingClock()
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST, clock=clock)

    def refused() -> int:
        return kube.requests.count(verb="watch", resource="ephemeralrunners", code=429)

    async def refused_times(n: int) -> None:
        async def check() -> bool:
            return refused() == n

        await eventually(check)

    async with running(informer):
        lists = informer.lists
        kube.requests.reset()
        kube.faults.restart()
        await refused_times(1)
        assert clock.slept == [1.0]
        # Writes go on meanwhile; the informer sends nothing until its clock has moved 1 s.
        await churn(objects, seeded, round=0)
        await clock.advance(0.5)
        await churn(objects, seeded, round=1)
        assert refused() == 1
        await clock.advance(0.5)
        await refused_times(2)
        assert clock.slept == [1.0, 1.0]
        assert informer.lists == lists
        kube.faults.initialized()
        await churn(objects, seeded, round=2)
        await clock.advance(1.0)
        await converge(informer, objects, seeded)
        assert informer.lists == lists + 1
    assert clock.slept == [1.0, 1.0]
    assert refused() == 2
    # The informer's own (cluster-wide) list: one, on the 410 once the window ended.
    assert kube.requests.count(verb="list", resource="ephemeralrunners", namespace="") == 1


async def test_a_refused_list_is_retried_after_the_delay_the_server_asks(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    clock = RecordingClock()
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST, clock=clock)
    kube.faults.inject(verb="list", resource="ephemeralrunners", status=429, count=1)
    task = asyncio.create_task(informer.run())
    try:

        async def refused() -> bool:
            return kube.requests.count(verb="list", code=429) == 1

        await eventually(refused)
        assert clock.slept == [1.0]
        assert not informer.synced.is_set()
        await clock.advance(1.0)
        await asyncio.wait_for(informer.synced.wait(), 10)
        assert len(informer.store) == 5
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_retry_after_beyond_the_cap_waits_only_the_cap(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    """A server (or a proxy) asking for longer than `retry_after_max` is waited on for the cap
    only, then asked again."""
    clock = RecordingClock()
    settings = dataclasses.replace(FAST, retry_after_max=0.25)
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=settings, clock=clock)
    kube.faults.inject(verb="list", resource="ephemeralrunners", status=429, count=1)
    task = asyncio.create_task(informer.run())
    try:

        async def refused() -> bool:
            return kube.requests.count(verb="list", code=429) == 1

        await eventually(refused)
        assert clock.slept == [0.25]
        await clock.advance(0.25)
        await asyncio.wait_for(informer.synced.wait(), 10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
