"""Informers against the emulator: the cache converges to the server after every fault."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from controller.runtime import Informer, WatchSettings
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import eventually, namespace_body, runner_body

FAST = WatchSettings(
    server_timeout=30, inactivity_timeout=1.0, request_timeout=5.0, retry_base=0.05, retry_max=0.2
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: JSONDict) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: JSONDict, new: JSONDict) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: JSONDict) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def server_state(objects: Objects, ns: str | None) -> dict[str, str]:
    listing = await objects.list(EPHEMERAL_RUNNER, ns)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in listing["items"]}


def cache_state(informer: Informer, ns: str | None) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list(ns)
    }


async def converge(informer: Informer, objects: Objects, ns: str) -> None:
    async def same() -> bool:
        return cache_state(informer, ns) == await server_state(objects, ns)

    await eventually(same)


async def churn(objects: Objects, ns: str, *, round: int) -> None:
    """Create two runners, change one, delete one created earlier."""
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body(f"new-{round}-a"))
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body(f"new-{round}-b"))
    await objects.patch(
        EPHEMERAL_RUNNER, ns, "seed-0", {"metadata": {"labels": {"round": str(round)}}}
    )
    await objects.delete(EPHEMERAL_RUNNER, ns, f"seed-{round + 1}")


@pytest.fixture
async def seeded(objects: Objects, ns: str) -> str:
    for i in range(5):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body(f"seed-{i}"))
    return ns


async def test_list_then_watch_delivers_every_change(objects: Objects, seeded: str) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    recorder = Recorder()
    informer.add_handler(recorder)
    async with running(informer):
        assert len(informer.store) == 5
        assert informer.store.get(seeded, "seed-0") is not None
        await churn(objects, seeded, round=0)
        await converge(informer, objects, seeded)
    assert sorted(e for e in recorder.events if e[0] != "add" or e[1].startswith("new")) == [
        ("add", "new-0-a"),
        ("add", "new-0-b"),
        ("delete", "seed-1"),
        ("update", "seed-0"),
    ]


async def test_a_large_list_is_read_in_pages(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    settings = WatchSettings(page_size=2, inactivity_timeout=5.0)
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=settings)
    kube.requests.reset()
    async with running(informer):
        assert sorted(o["metadata"]["name"] for o in informer.store) == [
            f"seed-{i}" for i in range(5)
        ]
        assert kube.requests.count(verb="list", resource="ephemeralrunners") == 3
        await churn(objects, seeded, round=0)
        await converge(informer, objects, seeded)


async def test_list_items_carry_kind_and_api_version(objects: Objects, seeded: str) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        obj = informer.store.get(seeded, "seed-0")
        assert obj is not None
        assert obj["kind"] == "EphemeralRunner"
        assert obj["apiVersion"] == "actions.github.com/v1alpha1"


Fault = Callable[[KubeEmulator], None]


def drop_watches(kube: KubeEmulator) -> None:
    kube.faults.drop_watches()


def force_gone(kube: KubeEmulator) -> None:
    kube.faults.force_gone()


@pytest.mark.parametrize("fault", [drop_watches, force_gone], ids=["dropped-watch", "410-gone"])
async def test_cache_converges_after_a_watch_fault(
    kube: KubeEmulator, objects: Objects, seeded: str, fault: Fault
) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        for round in range(2):
            fault(kube)
            await churn(objects, seeded, round=round)
            await converge(informer, objects, seeded)


async def test_a_410_relists_and_delivers_what_happened_meanwhile(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    recorder = Recorder()
    async with running(informer):
        await churn(objects, seeded, round=0)
        await converge(informer, objects, seeded)
        informer.add_handler(recorder)
        recorder.events.clear()
        lists = informer.lists
        # Held requests keep the re-list waiting while the server changes underneath it.
        kube.faults.pause()
        kube.faults.force_gone()
        body = runner_body("while-gone")
        body["metadata"]["namespace"] = seeded
        kube.apply(body)
        kube.faults.resume()
        await converge(informer, objects, seeded)
        assert informer.lists == lists + 1
    assert recorder.events == [("add", "while-gone")]


async def test_a_hung_watch_request_is_abandoned_and_retried(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        hang = kube.faults.latency(60.0, verb="watch")
        kube.faults.drop_watches()
        await churn(objects, seeded, round=0)

        async def abandoned_twice() -> bool:
            return informer.failures >= 2

        await eventually(abandoned_twice)
        kube.faults.remove(hang)
        await converge(informer, objects, seeded)


async def test_a_namespace_scope_sees_only_its_namespaces(
    kube: KubeEmulator, objects: Objects, seeded: str
) -> None:
    other = f"{seeded}-other"
    kube.apply(namespace_body(other))
    await objects.create(EPHEMERAL_RUNNER, other, runner_body("elsewhere"))
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, namespaces=[seeded], settings=FAST)
    async with running(informer):
        await objects.create(EPHEMERAL_RUNNER, other, runner_body("elsewhere-2"))
        await churn(objects, seeded, round=0)
        await converge(informer, objects, seeded)
        assert informer.store.list(other) == []


async def test_the_owner_index_follows_owner_changes(objects: Objects, ns: str) -> None:
    def owned(uid: str) -> JSONDict:
        ref = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "name": "set",
            "uid": uid,
            "controller": True,
        }
        return {"metadata": {"ownerReferences": [ref]}}

    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        for name in ("a", "b"):
            body = runner_body(name)
            body["metadata"].update(owned("uid-1")["metadata"])
            await objects.create(EPHEMERAL_RUNNER, ns, body)
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body("orphan"))
        await converge(informer, objects, ns)
        assert [o["metadata"]["name"] for o in informer.store.owned_by("uid-1")] == ["a", "b"]
        await objects.patch(EPHEMERAL_RUNNER, ns, "b", owned("uid-2"))
        await objects.delete(EPHEMERAL_RUNNER, ns, "a")
        await converge(informer, objects, ns)
        assert informer.store.owned_by("uid-1") == []
        assert [o["metadata"]["name"] for o in informer.store.owned_by("uid-2")] == ["b"]


async def test_watches_cut_after_progress_reconnect_without_a_growing_delay(
    kube: KubeEmulator, objects: Objects, seeded: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A watch that delivered events and is then cut is not one more failure in a row: found by
    the chaos runs (RELIABILITY.md), where a few cuts made every reconnect wait retry_max."""
    settings = WatchSettings(
        server_timeout=30, inactivity_timeout=5.0, request_timeout=5.0, retry_base=0.01, retry_max=5
    )
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=settings)
    caplog.set_level("WARNING", logger="controller.runtime.cache")
    async with running(informer):
        for round in range(3):
            await churn(objects, seeded, round=round)
            await converge(informer, objects, seeded)
            failures = informer.failures
            kube.faults.drop_watches()

            async def reconnected(before: int = failures) -> bool:
                return informer.failures > before

            await eventually(reconnected)
        await churn(objects, seeded, round=3)
        await converge(informer, objects, seeded)
    failed = [r for r in caplog.records if r.getMessage().startswith("list or watch of ")]
    delays = [r.delay for r in failed]  # type: ignore[attr-defined]
    assert len(delays) >= 3
    assert set(delays) == {0.01}
    # The kind and the cause in the line itself, which is all the text format shows (before:
    # "list or watch failed, retrying" and the rest in fields only).
    assert failed[0].getMessage().startswith("list or watch of EphemeralRunner failed (")
    assert failed[0].getMessage().endswith("), retrying in 0.0 s")
