"""Own writes' echoes (docs/controller-runtime.md#own-writes) and wakes by cause
(docs/controller-runtime.md#wakes), through a manager against the emulator: a pass's own status
write wakes nothing when the controller says so, another writer's always does."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from controller.runtime import (
    Controller,
    Informer,
    LazyObject,
    Manager,
    OwnWrite,
    Request,
    Result,
    RuntimeSettings,
    WatchSettings,
)
from controller.runtime.controller import changed_fields
from controller.runtime.echoes import MAX_VERSIONS, Echoes
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import POD, Objects
from shared.typedefs import JSONDict
from tests.controller.conftest import metric as summed
from tests.controller.runtime.conftest import eventually, namespace_body, runner_body
from tests.controller.runtime.test_informer import FAST


class Marking:
    """Writes `status.phase: Pending` on a runner that has none, and counts passes."""

    def __init__(self, manager: Manager) -> None:
        self.cache = manager.cache(EPHEMERAL_RUNNER)
        self.objects = manager.objects
        self.calls: Counter[str] = Counter()

    async def reconcile(self, request: Request) -> Result:
        self.calls[request.name] += 1
        obj = self.cache.get(request.namespace, request.name)
        if obj is not None and not (obj.get("status") or {}).get("phase"):
            handle = LazyObject(obj, kind=EPHEMERAL_RUNNER)
            handle.mutate().setdefault("status", {})["phase"] = "Pending"
            await handle.write(self.objects)
        return Result()


@pytest.fixture(params=[frozenset(), frozenset({OwnWrite.STATUS})], ids=["echoes", "no-echoes"])
async def running(
    request: pytest.FixtureRequest, namespace: str
) -> AsyncIterator[tuple[Manager, Marking, Objects, str, bool]]:
    own_writes: frozenset[OwnWrite] = request.param
    async with KubeEmulator(kubelet=False) as kube:
        kube.apply_crds(project_crds())
        kube.apply(namespace_body(namespace))
        async with client.ApiClient(await kube.configuration()) as api:
            settings = RuntimeSettings(
                namespaces=frozenset({namespace}),
                watch=WatchSettings(inactivity_timeout=5.0, retry_base=0.05),
                leader_election=None,
            )
            manager = Manager(api=api, settings=settings)
            reconciler = Marking(manager)
            manager.add(
                Controller(
                    name="runner",
                    for_=EPHEMERAL_RUNNER,
                    reconciler=reconciler,
                    own_writes=own_writes,
                )
            )
            task = asyncio.create_task(manager.run())
            try:
                await asyncio.wait_for(manager.wait_synced(), 10)
                yield manager, reconciler, Objects(api, timeout=5.0), namespace, bool(own_writes)
            finally:
                manager.stop()
                await asyncio.wait_for(task, 10)


def metric(manager: Manager, sample: str, /, **labels: str) -> float:
    """The sum of the samples whose labels include `labels`."""
    return summed(manager.metrics.render().decode(), sample, **labels)


async def test_a_pass_does_not_wake_on_its_own_status_write_but_on_another_writers(
    running: tuple[Manager, Marking, Objects, str, bool],
) -> None:
    manager, rec, objects, ns, dropped = running
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))

    async def echoed() -> bool:
        # Without the option, the echo of the `Pending` write is a second (no-op) pass.
        return (
            metric(manager, "gha_runtime_wakes_total", controller="runner") == (1 if dropped else 2)
            and metric(manager, "controller_runtime_active_workers") == 0
        )

    await eventually(echoed)
    await eventually(lambda: _settled(manager, rec, 1 if dropped else 2))
    assert metric(manager, "gha_runtime_echoes_dropped_total", controller="runner") == (
        1 if dropped else 0
    )
    before = rec.calls["r"]
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"status": {"phase": "Running"}}, status=True)
    await eventually(lambda: _settled(manager, rec, before + 1))

    def woken_by(fields: str) -> float:
        return metric(
            manager,
            "gha_runtime_wakes_total",
            controller="runner",
            watch="runner",
            event="update",
            fields=fields,
        )

    # The echo of the first status write (the whole `status` appeared), then the other writer's.
    assert woken_by("status") == (0 if dropped else 1)
    assert woken_by("status.phase") == 1


async def _settled(manager: Manager, rec: Marking, calls: int) -> bool:
    await asyncio.sleep(0)
    return rec.calls["r"] == calls and metric(manager, "controller_runtime_active_workers") == 0


def test_changed_fields_names_what_an_update_changed_two_levels_deep() -> None:
    old: JSONDict = {
        "metadata": {"name": "r", "resourceVersion": "1", "labels": {"a": "1"}},
        "spec": {"x": 1},
        "status": {"phase": "Pending", "ready": False},
    }
    new: JSONDict = {
        "metadata": {"name": "r", "resourceVersion": "2", "labels": {"a": "2"}},
        "spec": {"x": 1},
        "status": {"phase": "Running", "ready": False, "jobId": "j"},
    }
    assert changed_fields(old, new) == "metadata.labels,status.jobId,status.phase"
    assert (
        changed_fields(old, {**old, "metadata": {**old["metadata"], "resourceVersion": "3"}}) == ""
    )


def test_an_echo_wakes_nothing_once_and_only_for_the_categories_asked() -> None:
    runner = {"metadata": {"name": "r", "namespace": "ns", "resourceVersion": "5"}}
    pod = {"metadata": {"name": "r", "namespace": "ns", "resourceVersion": "6"}}
    echoes = Echoes(primary=EPHEMERAL_RUNNER, children=[POD], ignore=[OwnWrite.STATUS])
    echoes.wrote(EPHEMERAL_RUNNER, runner, "status")
    echoes.wrote(
        EPHEMERAL_RUNNER,
        {**runner, "metadata": {**runner["metadata"], "resourceVersion": "7"}},
        "object",
    )
    echoes.wrote(POD, pod, "object")
    assert echoes.is_echo(EPHEMERAL_RUNNER, runner) is True
    assert echoes.is_echo(EPHEMERAL_RUNNER, runner) is False
    assert len(echoes) == 0
    # A pass deleting its own object finalizes it too, so that deletion's echo wakes nothing
    # (it used to be left to the echo: a wake per deleted runner).
    full = Echoes(primary=EPHEMERAL_RUNNER, children=[POD], ignore=list(OwnWrite))
    full.wrote(EPHEMERAL_RUNNER, runner, "delete")
    full.wrote(POD, pod, "delete")
    assert (full.is_echo(EPHEMERAL_RUNNER, runner), full.is_echo(POD, pod)) == (True, True)
    for version in range(MAX_VERSIONS + 3):
        full.wrote(
            POD, {"metadata": {**pod["metadata"], "resourceVersion": str(version)}}, "object"
        )
    assert len(full) == MAX_VERSIONS
    full.forget(POD, pod)
    assert len(full) == 0


class EchoCheck:
    """An informer handler that asks the echoes, as a controller's does, of every update."""

    def __init__(self, echoes: Echoes) -> None:
        self.echoes = echoes
        self.updates: list[tuple[str, bool]] = []

    def on_add(self, obj: JSONDict) -> None:
        pass

    def on_update(self, old: JSONDict, new: JSONDict) -> None:
        self.updates.append(
            (new["metadata"]["resourceVersion"], self.echoes.is_echo(EPHEMERAL_RUNNER, new))
        )

    def on_delete(self, obj: JSONDict) -> None:
        pass


async def test_an_update_a_relist_delivers_is_no_echo_though_it_shows_an_own_write(
    kube: KubeEmulator, objects: Objects, ns: str
) -> None:
    """While the watch is down another writer changes the object, then a pass writes it too;
    the relist after a 410 shows both in one update carrying the pass's version: it must wake
    (the chaos run's runner whose pod finished during an outage stayed Running forever)."""
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    echoes = Echoes(primary=EPHEMERAL_RUNNER, children=[], ignore=list(OwnWrite))
    check = EchoCheck(echoes)
    informer.add_handler(check)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        with kube.faults.frozen_caches("ephemeralrunners"):
            await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"labels": {"k": "1"}}})
            own = await objects.patch(
                EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"a": "1"}}}
            )
            echoes.wrote(EPHEMERAL_RUNNER, own, "object")
            kube.faults.force_gone()
        version = own["metadata"]["resourceVersion"]

        async def delivered() -> bool:
            return any(rv == version for rv, _ in check.updates)

        await eventually(delivered)
        assert (version, False) in check.updates
        assert len(echoes) == 0
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
