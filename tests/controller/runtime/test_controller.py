"""Controllers in a manager against the emulator: what enqueues what, predicates on owned
watches, metrics of reconciles, drops and copies."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from controller.ephemeralrunner.predicates import POD_TO_ER
from controller.runtime import (
    Backoff,
    Controller,
    LazyObject,
    Manager,
    Owns,
    Request,
    Result,
    RulePredicate,
    RuntimeSettings,
    Watches,
    WatchSettings,
)
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.errors import Conflict
from shared.kube.objects import CONFIG_MAP, POD, Kind, Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import (
    eventually,
    namespace_body,
    runner_body,
    sample_value,
)

NAMESPACE = Kind("Namespace", "namespaces", namespaced=False)


def metric(manager: Manager, sample: str, /, **labels: str) -> float:
    return sample_value(manager.metrics.render().decode(), sample, **labels)


class Recording:
    """Counts reconciles per key; marks runners labelled `mutate` ready through a lazy copy;
    fails once for runners labelled `fail-once`; holds the first pass of runners labelled
    `hold` until `release` is set."""

    def __init__(self, manager: Manager) -> None:
        self.cache = manager.cache(EPHEMERAL_RUNNER)
        self.objects = manager.objects
        self.calls: Counter[str] = Counter()
        self.changed = asyncio.Condition()
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.calls[request.name] += 1
        async with self.changed:
            self.changed.notify_all()
        obj = self.cache.get(request.namespace, request.name)
        if obj is None:
            return Result()
        labels = obj["metadata"].get("labels") or {}
        if labels.get("hold") and self.calls[request.name] == 1:
            self.holding.set()
            await self.release.wait()
        if labels.get("fail-once") and self.calls[request.name] == 1:
            raise RuntimeError("first attempt fails")
        if labels.get("conflict-once") and self.calls[request.name] == 1:
            # What the API server answers a write carrying an older resourceVersion.
            raise Conflict(
                'Operation cannot be fulfilled on ephemeralrunners "r": the object has been '
                "modified; please apply your changes to the latest version and try again",
                code=409,
                reason="Conflict",
            )
        if labels.get("create-in") and self.calls[request.name] == 1:
            # A real create the API server refuses: its namespace is being deleted.
            await self.objects.create(
                CONFIG_MAP, labels["create-in"], {"metadata": {"name": request.name}}
            )
        handle = LazyObject(obj, kind=EPHEMERAL_RUNNER)
        if labels.get("mutate") and (obj.get("status") or {}).get("phase") != "Pending":
            handle.mutate().setdefault("status", {})["phase"] = "Pending"
        await handle.write(self.objects)
        return Result()

    async def wait(self, name: str, count: int) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(lambda: self.calls[name] >= count)


@pytest.fixture
async def quiet_kube() -> AsyncIterator[KubeEmulator]:
    """An emulator without a kubelet, so pods change only when a test changes them."""
    async with KubeEmulator(kubelet=False) as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


def quiet(obj: JSONDict) -> bool:
    """The test reconciler's rule: an update leaving a runner annotated `quiet` changes nothing
    it would do."""
    return bool((obj["metadata"].get("annotations") or {}).get("quiet"))


@pytest.fixture
async def setup(
    quiet_kube: KubeEmulator, namespace: str
) -> AsyncIterator[tuple[Manager, Recording, Objects, str]]:
    quiet_kube.apply(namespace_body(namespace))
    async with client.ApiClient(await quiet_kube.configuration()) as api:
        settings = RuntimeSettings(
            namespaces=frozenset({namespace}),
            workers=3,
            backoff=Backoff(base=0.01, maximum=0.1),
            watch=WatchSettings(inactivity_timeout=5.0, retry_base=0.05),
            leader_election=None,
        )
        manager = Manager(api=api, settings=settings)
        reconciler = Recording(manager)

        def by_config_map(cm: JSONDict) -> list[Request]:
            runner = (cm.get("data") or {}).get("runner")
            return [Request(cm["metadata"]["namespace"], runner)] if runner else []

        manager.add(
            Controller(
                name="runner",
                for_=EPHEMERAL_RUNNER,
                reconciler=reconciler,
                predicate=RulePredicate("runner-rule", lambda _old, new: not quiet(new)),
                owns=[Owns(POD, predicate=POD_TO_ER)],
                watches=[Watches(CONFIG_MAP, map=by_config_map, wakes=lambda cm: not quiet(cm))],
            )
        )
        task = asyncio.create_task(manager.run())
        try:
            await asyncio.wait_for(manager.leading.wait(), 10)
            await asyncio.wait_for(manager.wait_synced(), 10)
            yield manager, reconciler, Objects(api, timeout=5.0), namespace
        finally:
            manager.stop()
            await asyncio.wait_for(task, 10)


def pod_of(runner: JSONDict) -> JSONDict:
    meta = runner["metadata"]
    return {
        "metadata": {
            "name": meta["name"],
            "ownerReferences": [
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunner",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "runner", "image": "runner:1"}]},
    }


Setup = tuple[Manager, Recording, Objects, str]


async def test_owned_pod_events_enqueue_the_owner(setup: Setup) -> None:
    _, rec, objects, ns = setup
    runner = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await rec.wait("r", 1)
    before = rec.calls["r"]
    await objects.create(POD, ns, pod_of(runner))
    await rec.wait("r", before + 1)
    before = rec.calls["r"]
    await objects.delete(POD, ns, "r", grace_period_seconds=0)
    await rec.wait("r", before + 1)


async def test_a_pod_update_outside_the_projection_is_dropped_and_counted(setup: Setup) -> None:
    manager, rec, objects, ns = setup
    runner = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await objects.create(POD, ns, pod_of(runner))
    await rec.wait("r", 2)
    calls = rec.calls["r"]
    dropped = POD_TO_ER.name

    await objects.patch(POD, ns, "r", {"metadata": {"labels": {"noise": "1"}}})

    async def counted() -> bool:
        return metric(manager, "gha_runtime_predicate_dropped_total", watch=dropped) == 1

    await eventually(counted)
    assert rec.calls["r"] == calls
    # Readiness is read (a pod phase alone no longer is: the projection reads the pod as the
    # reconciler does, and a live runner container is one value whatever the phase).
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    await objects.patch(POD, ns, "r", {"status": ready}, status=True)
    await rec.wait("r", calls + 1)
    assert metric(manager, "gha_runtime_predicate_dropped_total", watch=dropped) == 1


async def test_the_primary_watch_sees_every_update(setup: Setup) -> None:
    _, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await rec.wait("r", 1)
    for i in range(3):
        before = rec.calls["r"]
        await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"n": str(i)}}})
        await rec.wait("r", before + 1)


async def test_a_primary_predicate_drops_only_the_updates_its_rule_rejects(setup: Setup) -> None:
    """`Controller(predicate=...)`: the reconciler's own rule for updates of its primary
    (docs/controller-runtime.md#a-primary-watchs-predicate); adds and deletes always wake, and
    a wake keeps the controller's name as its watch."""
    manager, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await rec.wait("r", 1)
    calls = rec.calls["r"]
    dropped = 0

    async def one_more_dropped() -> bool:
        return metric(manager, "gha_runtime_predicate_dropped_total", watch="runner-rule") == (
            dropped + 1
        )

    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"quiet": "1"}}})
    await eventually(one_more_dropped)
    dropped += 1
    assert rec.calls["r"] == calls
    woken = metric(manager, "gha_runtime_wakes_total", watch="runner", event="update")
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"quiet": None}}})
    await rec.wait("r", calls + 1)
    assert metric(manager, "gha_runtime_wakes_total", watch="runner", event="update") == woken + 1
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"quiet": "2"}}})
    await eventually(one_more_dropped)
    await objects.delete(EPHEMERAL_RUNNER, ns, "r")
    await rec.wait("r", calls + 2)


async def test_informers_report_their_lists_and_objects(setup: Setup) -> None:
    manager, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await rec.wait("r", 1)
    assert metric(manager, "gha_runtime_informer_objects", kind="EphemeralRunner") == 1
    assert metric(manager, "gha_runtime_informer_lists_total", kind="EphemeralRunner") == 1
    assert metric(manager, "gha_runtime_informer_lists_total", kind="Pod") == 1


async def test_a_mapped_watch_enqueues_the_keys_it_names(setup: Setup) -> None:
    _, rec, objects, ns = setup
    await objects.create(CONFIG_MAP, ns, {"metadata": {"name": "c"}, "data": {"runner": "x"}})
    await rec.wait("x", 1)


async def test_a_mapped_watch_wakes_only_on_what_its_rule_accepts(setup: Setup) -> None:
    """`Watches(wakes=)` judges adds and deletes; events of one informer arrive in order, so
    once the later ConfigMap's key ran, the quiet one's add was judged."""
    _, rec, objects, ns = setup
    quiet_map = {"metadata": {"name": "q", "annotations": {"quiet": "1"}}, "data": {"runner": "x"}}
    await objects.create(CONFIG_MAP, ns, quiet_map)
    await objects.create(CONFIG_MAP, ns, {"metadata": {"name": "c"}, "data": {"runner": "y"}})
    await rec.wait("y", 1)
    assert rec.calls["x"] == 0


async def test_an_event_during_a_pass_wakes_the_key_whatever_the_rule_says(
    setup: Setup,
) -> None:
    """The runtime's in-pass guard (docs/controller-runtime.md#wake-rules): the rule judges a
    cache the running pass did not decide on, so the update runs the key again after it."""
    manager, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r", labels={"hold": "1"}))
    await asyncio.wait_for(rec.holding.wait(), 10)
    woken = metric(manager, "gha_runtime_wakes_total", watch="runner", event="update")
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"annotations": {"quiet": "1"}}})

    async def woken_again() -> bool:
        return metric(manager, "gha_runtime_wakes_total", watch="runner", event="update") == (
            woken + 1
        )

    await eventually(woken_again)
    assert metric(manager, "gha_runtime_predicate_dropped_total", watch="runner-rule") == 0
    rec.release.set()
    await rec.wait("r", 2)


async def test_copies_are_counted_only_for_reconciles_that_mutate(setup: Setup) -> None:
    manager, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("plain"))
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("changed", labels={"mutate": "1"}))

    async def pending() -> bool:
        obj = await objects.get(EPHEMERAL_RUNNER, ns, "changed")
        return (obj.get("status") or {}).get("phase") == "Pending"

    await eventually(pending)
    await rec.wait("changed", 2)
    assert rec.calls["plain"] >= 1
    assert metric(manager, "gha_runtime_copies_total", controller="runner") == 1


async def test_a_failed_reconcile_is_retried_and_counted(setup: Setup) -> None:
    manager, rec, objects, ns = setup
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("flaky", labels={"fail-once": "1"}))
    await rec.wait("flaky", 2)
    assert metric(manager, "controller_runtime_reconcile_errors_total", controller="runner") == 1
    assert metric(manager, "workqueue_retries_total", name="runner") == 1
    assert (
        metric(manager, "controller_runtime_reconcile_total", controller="runner", result="success")
        >= 1
    )


async def test_a_conflict_is_retried_quietly_not_counted_as_an_error(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a 409 between two of the controller's own reconcilers was logged at ERROR with a
    traceback and counted in controller_runtime_reconcile_errors_total."""
    manager, rec, objects, ns = setup
    with caplog.at_level(logging.INFO, logger="controller.runtime.controller"):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r", labels={"conflict-once": "1"}))
        await rec.wait("r", 2)
    assert metric(manager, "controller_runtime_reconcile_errors_total", controller="runner") == 0
    assert (
        metric(manager, "controller_runtime_reconcile_total", controller="runner", result="requeue")
        == 1
    )
    [line] = [r for r in caplog.records if "newer version" in r.getMessage()]
    assert (line.levelno, line.exc_info) == (logging.INFO, None)
    assert line.getMessage().startswith("reconcile met a newer version (Conflict); requeued in ")


async def test_a_create_refused_by_a_terminating_namespace_is_no_error(
    setup: Setup, quiet_kube: KubeEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """403 `NamespaceTerminating` is the namespace lifecycle admission, not RBAC: retried, but
    neither counted as an error nor logged with a traceback (on a real cluster operators read
    these "403 Forbidden" tracebacks as a permission problem)."""
    manager, rec, objects, ns = setup
    going = f"{ns}-going"
    quiet_kube.apply(namespace_body(going))
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    await objects.create(CONFIG_MAP, going, held)
    await objects.delete(NAMESPACE, None, going)
    with caplog.at_level(logging.INFO, logger="controller.runtime"):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body("late", labels={"create-in": going}))
        await rec.wait("late", 2)
    refused = [r for r in caplog.records if "namespace is being deleted" in r.getMessage()]
    assert [(r.levelname, r.exc_info) for r in refused] == [("INFO", None)]
    assert "being terminated" in str(getattr(refused[0], "error", ""))
    assert metric(manager, "controller_runtime_reconcile_errors_total", controller="runner") == 0
    await objects.patch(CONFIG_MAP, going, "held", {"metadata": {"finalizers": None}})


async def test_stop_drains_an_in_flight_reconcile(quiet_kube: KubeEmulator, namespace: str) -> None:
    ns = namespace
    quiet_kube.apply(namespace_body(ns))
    release = asyncio.Event()
    finished: list[str] = []

    class Slow:
        async def reconcile(self, request: Request) -> Result:
            await release.wait()
            finished.append(request.name)
            return Result()

    async with client.ApiClient(await quiet_kube.configuration()) as api:
        manager = Manager(api=api, settings=RuntimeSettings(leader_election=None))
        manager.add(Controller(name="slow", for_=EPHEMERAL_RUNNER, reconciler=Slow()))
        closed: list[bool] = []

        async def on_shutdown() -> None:
            closed.append(bool(finished))

        manager.on_shutdown(on_shutdown)
        task = asyncio.create_task(manager.run())
        await Objects(api).create(EPHEMERAL_RUNNER, ns, runner_body("r"))

        async def in_flight() -> bool:
            return metric(manager, "controller_runtime_active_workers", controller="slow") == 1

        await eventually(in_flight)
        manager.stop()
        await asyncio.sleep(0)
        assert not task.done()
        release.set()
        await asyncio.wait_for(task, 10)
    assert finished == ["r"]
    assert closed == [True]
