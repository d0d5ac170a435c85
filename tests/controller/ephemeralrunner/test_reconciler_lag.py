"""Nothing skipped under lag (issue 43): a controller whose workers are held (as behind a long
backlog) still records every job's timeline and protects every busy pod
(docs/reconcilers.md#under-lag). The hold is a gate in front of the reconciler's passes: events
keep arriving and are queued, as they are while the workers are busy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

import pytest

from controller.runtime import Request, Result
from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import EVENT
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions

WORKERS = 4


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",), kubelet=False)


class Gate:
    """Holds the passes of the EphemeralRunner reconciler (over the runners named in `only`, or
    every one) until opened; records the keys in the order their passes start."""

    def __init__(
        self, rig: Rig, monkeypatch: pytest.MonkeyPatch, only: Collection[str] | None = None
    ) -> None:
        [ctrl] = [c for c in rig.manager.controllers if c.name == "ephemeralrunner"]
        self.open = asyncio.Event()
        self.started: list[str] = []
        original: Callable[[Request], Awaitable[Result]] = ctrl.reconciler.reconcile

        async def held(request: Request) -> Result:
            if only is None or request.name in only:
                await self.open.wait()
            self.started.append(request.name)
            return await original(request)

        monkeypatch.setattr(ctrl.reconciler, "reconcile", held)


async def test_a_runner_done_before_any_pass_saw_its_job_still_gets_its_timeline(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = await rig.create_runner()
    name = created["metadata"]["name"]
    [runner] = await rig.registered(1)
    await rig.settle()
    gate = Gate(rig, monkeypatch)
    # The listener's JobStarted (with its part of the timeline), the job done, and the runner
    # deleted, all before the lagging controller passes over the runner again.
    await rig.job_started(runner)
    await rig.set_status(
        name, timeline={tl.JOB_STARTED: "2026-12-06T08:00:05Z", tl.RUNNER_CREATED: "x"}
    )
    rig.job_finished(runner)
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, name)
    cache = rig.manager.cache(EPHEMERAL_RUNNER)

    async def cached_deleting() -> bool:
        return bool(((cache.get(rig.namespace, name) or {})["metadata"]).get("deletionTimestamp"))

    await rig.until(cached_deleting, what="the cache showing the deletion")
    gate.open.set()

    async def gone() -> bool:
        return await rig.runner(name) is None

    await rig.until(gone, what="runner finalized")
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    timelines = [e for e in events if e["reason"] == tl.EVENT_REASON]
    assert [e["involvedObject"]["name"] for e in timelines] == [name]


@pytest.mark.parametrize(
    "rig_options",
    # Without workers kept for the urgent lane: the shared workers take it first.
    [RigOptions(controllers=("ephemeralrunner",), kubelet=True, urgent_workers=0)],
)
async def test_a_runner_turning_busy_is_handled_before_the_backlog(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = WORKERS + 6
    names = [(await rig.create_runner())["metadata"]["name"] for _ in range(count)]
    runners = {r["metadata"]["name"]: r for r in await rig.registered(count)}

    async def pods_running() -> bool:
        pods = [await rig.pod(name) for name in names]
        return all(p is not None and p["status"].get("phase") == "Running" for p in pods)

    await rig.until(pods_running, what="runner pods running")
    # Requeues scheduled earlier (a pod expected) would take a worker in the middle.
    await rig.settle(delayed=True)
    gate = Gate(rig, monkeypatch)
    [ctrl] = [c for c in rig.manager.controllers if c.name == "ephemeralrunner"]
    backlog, hot = names[:-1], names[-1]
    for name in backlog:
        await rig.set_status(name, message="backlog")
    waiting = len(backlog) - WORKERS

    async def backlogged() -> bool:
        return len(ctrl.queue) == waiting

    await rig.until(backlogged, what="the backlog queued behind the held workers")
    await rig.job_started(runners[hot])

    async def queued() -> bool:
        return len(ctrl.queue) == waiting + 1

    await rig.until(queued, what="the job's event queued")
    held = {key.name for key in ctrl.queue.processing}
    gate.open.set()

    async def protected() -> JSONDict | None:
        pod = await rig.pod(hot)
        annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
        return pod if "karpenter.sh/do-not-disrupt" in annotations else None

    await rig.until(protected, what="busy pod protected")
    await rig.settle()
    # The workers held a key each before the job started; the busy runner's pass comes before
    # every key that waited in the queue.
    waited = [name for name in backlog if name not in held]
    assert len(waited) == waiting
    assert all(gate.started.index(hot) < gate.started.index(name) for name in waited), gate.started


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=True)]
)
async def test_a_runner_turning_busy_is_protected_while_every_shared_worker_is_held(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The urgent lane's own workers (docs/controller-runtime.md#the-urgent-lane): passes that
    hold every shared worker (slow Actions calls, a backlog) do not hold up the protection of a
    pod whose runner turns busy; the held passes are still held when it lands."""
    names = [(await rig.create_runner())["metadata"]["name"] for _ in range(WORKERS + 2)]
    runners = {r["metadata"]["name"]: r for r in await rig.registered(len(names))}

    async def pods_running() -> bool:
        pods = [await rig.pod(name) for name in names]
        return all(p is not None and p["status"].get("phase") == "Running" for p in pods)

    await rig.until(pods_running, what="runner pods running")
    await rig.settle(delayed=True)
    backlog, hot = names[:-1], names[-1]
    gate = Gate(rig, monkeypatch, only=backlog)
    [ctrl] = [c for c in rig.manager.controllers if c.name == "ephemeralrunner"]
    for name in backlog:
        await rig.set_status(name, message="backlog")

    async def held() -> bool:
        return len(ctrl.queue.processing) == WORKERS and len(ctrl.queue) == 1

    await rig.until(held, what="every shared worker held, one key waiting")
    await rig.job_started(runners[hot])

    async def protected() -> JSONDict | None:
        pod = await rig.pod(hot)
        annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
        return pod if "karpenter.sh/do-not-disrupt" in annotations else None

    await rig.until(protected, what="busy pod protected")
    assert not gate.open.is_set()
    assert len(ctrl.queue.processing & {Request(rig.namespace, n) for n in backlog}) == WORKERS
    gate.open.set()
    await rig.settle()
