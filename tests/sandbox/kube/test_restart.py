"""A control-plane restart: watches end, 429 `storage is (re)initializing` while the watch
caches initialise, then 410 for the versions from before."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.emulator import project_crds
from tests.sandbox.kube.conftest import (
    GROUP,
    TIMEOUT,
    VERSION,
    WIDGETS,
    wait_for,
    widget,
    widget_events,
)
from tests.sandbox.kube.test_faults import admin

pytestmark = pytest.mark.usefixtures("widgets")

INITIALIZING = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "storage is (re)initializing",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}


class EmulatorClock:
    """The emulator's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock() -> EmulatorClock:
    return EmulatorClock()


@pytest.fixture
async def kube(clock: EmulatorClock) -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(clock=clock) as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


async def raw_get(kube: KubeEmulator, path: str, **query: str) -> tuple[int, Any, str | None]:
    """Status, decoded body (the first line of a watch) and Retry-After of a GET."""
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{kube.url}{path}",
            params=query,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        return (
            resp.status,
            json.loads(await resp.content.readline()),
            resp.headers.get("Retry-After"),
        )


def widgets_path(ns: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{WIDGETS}"


async def test_a_restart_refuses_watches_until_the_window_passes_then_old_versions_are_gone(
    kube: KubeEmulator, clock: EmulatorClock, co: client.CustomObjectsApi, ns: str
) -> None:
    first = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("a"))
    old = first["metadata"]["resourceVersion"]
    baseline = len(kube.store.subscriptions)
    watching = asyncio.create_task(widget_events(co, ns, resource_version=old, count=1))
    await wait_for(lambda: len(kube.store.subscriptions) > baseline)
    kube.requests.reset()

    kube.faults.restart(seconds=30)

    assert await watching == []  # the stream ended, without an event
    path = widgets_path(ns)
    for query in (
        {"watch": "true", "resourceVersion": old},
        {"watch": "1"},
        {"resourceVersion": "0"},
    ):
        assert await raw_get(kube, path, **query) == (429, INITIALIZING, "1")
    # Writes, gets and consistent lists go to etcd, which is up.
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    during = listed["metadata"]["resourceVersion"]
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("b"))
    clock.advance(29)
    with pytest.raises(client.ApiException) as exc:
        await widget_events(co, ns, resource_version=during, count=1)
    assert exc.value.status == 429
    assert "storage is (re)initializing" in str(exc.value.reason)
    assert kube.requests.count(verb="watch", code=429) == 3
    assert kube.requests.count(verb="list", code=429) == 1

    clock.advance(1)
    for version in (old, during):
        with pytest.raises(client.ApiException) as exc:
            await widget_events(co, ns, resource_version=version, count=1)
        assert exc.value.status == 410
        assert "too old resource version" in str(exc.value.reason)
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert [w["metadata"]["name"] for w in listed["items"]] == ["a", "b"]
    fresh = asyncio.create_task(
        widget_events(co, ns, resource_version=listed["metadata"]["resourceVersion"], count=1)
    )
    await wait_for(lambda: kube.requests.count(verb="watch", code=200) == 3)
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("c"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in await fresh] == [("ADDED", "c")]


async def test_over_http_a_restart_lasts_until_initialized(
    kube: KubeEmulator, clock: EmulatorClock, ns: str
) -> None:
    path = widgets_path(ns)
    code, body = await admin(kube, "faults/restart", {"seconds": "soon"})
    assert (code, body["reason"]) == (400, "BadRequest")
    assert (await raw_get(kube, path, resourceVersion="0"))[0] == 200
    assert await admin(kube, "faults/restart") == (200, {})
    clock.advance(3600)
    assert await raw_get(kube, path, resourceVersion="0") == (429, INITIALIZING, "1")
    assert await admin(kube, "faults/initialized") == (200, {})
    assert (await raw_get(kube, path, resourceVersion="0"))[0] == 200


async def test_clearing_the_faults_ends_a_restart(kube: KubeEmulator, ns: str) -> None:
    kube.faults.restart(seconds=60)
    assert await raw_get(kube, widgets_path(ns), resourceVersion="0") == (429, INITIALIZING, "1")
    kube.faults.clear()
    assert (await raw_get(kube, widgets_path(ns), resourceVersion="0"))[0] == 200


async def test_a_restart_can_leave_quiet_watches_without_bookmarks() -> None:
    """As a real API server did for 70 s and more after its restart: a watch of a resource
    nobody writes gets no bookmark while the quiet lasts, then bookmarks as before."""
    async with KubeEmulator(bookmark_interval=0.05) as kube:
        headers = {"Authorization": f"Bearer {kube.admin_token}"}
        kube.faults.restart(quiet=600)
        kube.faults.initialized()
        assert kube.faults.bookmarks_withheld()
        url = f"{kube.url}/api/v1/namespaces"
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.get(url) as listed:
                version = (await listed.json())["metadata"]["resourceVersion"]
            query = {"watch": "true", "allowWatchBookmarks": "true", "resourceVersion": version}
            async with http.get(url, params=query, timeout=aiohttp.ClientTimeout()) as resp:
                assert resp.status == 200
                with pytest.raises(TimeoutError):
                    # Ten bookmark intervals without a line.
                    await asyncio.wait_for(resp.content.readline(), 0.5)
                kube.faults.clear()
                line = await asyncio.wait_for(resp.content.readline(), TIMEOUT)
                assert json.loads(line)["type"] == "BOOKMARK"
