"""Checklist items 7 and 8: the watch protocol through kubernetes-asyncio and on the raw wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import (
    FIXTURES,
    GROUP,
    MERGE,
    TIMEOUT,
    VERSION,
    WIDGETS,
    status_of,
    wait_for,
    widget,
    widget_events,
)

pytestmark = pytest.mark.usefixtures("widgets")


async def test_watch_without_resource_version_replays_existing_objects(
    co: client.CustomObjectsApi, ns: str
) -> None:
    for name in ("a", "b"):
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget(name))
    seen = await widget_events(co, ns, count=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


async def test_watch_from_resource_version_sends_only_newer_events(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("old"))
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "old", {"spec": {"size": 2}}, _content_type=MERGE
    )
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("new"))
    seen = await widget_events(
        co, ns, resource_version=listed["metadata"]["resourceVersion"], count=2
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("MODIFIED", "old"),
        ("ADDED", "new"),
    ]
    assert seen[0]["object"]["apiVersion"] == f"{GROUP}/{VERSION}"
    assert seen[0]["object"]["kind"] == "Widget"


@pytest.fixture
async def small_history(namespace: str) -> AsyncIterator[tuple[KubeEmulator, client.ApiClient]]:
    async with KubeEmulator(watch_history=3, bookmark_interval=0.05) as kube:
        kube.apply_crds([FIXTURES / "widgets-crd.yaml"])
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        async with client.ApiClient(await kube.configuration()) as api:
            yield kube, api


async def test_watch_from_compacted_version_is_410_expired(
    small_history: tuple[KubeEmulator, client.ApiClient], namespace: str
) -> None:
    _, api = small_history
    co = client.CustomObjectsApi(api)
    first = await co.create_namespaced_custom_object(
        GROUP, VERSION, namespace, WIDGETS, widget("a")
    )
    for size in range(2, 7):
        await co.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, WIDGETS, "a", {"spec": {"size": size}}, _content_type=MERGE
        )
    with pytest.raises(client.ApiException) as exc:
        await widget_events(
            co, namespace, resource_version=first["metadata"]["resourceVersion"], count=1
        )
    assert exc.value.status == 410
    assert "Expired" in exc.value.reason


async def test_bookmarks_carry_the_current_resource_version(
    small_history: tuple[KubeEmulator, client.ApiClient], namespace: str
) -> None:
    kube, api = small_history
    co = client.CustomObjectsApi(api)
    seen = await widget_events(
        co,
        namespace,
        allow_watch_bookmarks=True,
        resource_version=str(kube.store.rv),
        count=1,
    )
    assert seen[0]["type"] == "BOOKMARK"
    assert seen[0]["object"]["metadata"]["resourceVersion"] == str(kube.store.rv)
    assert seen[0]["object"]["kind"] == "Widget"


async def test_timeout_seconds_closes_the_stream(co: client.CustomObjectsApi, ns: str) -> None:
    seen = await widget_events(co, ns, timeout_seconds=1, count=1)
    assert seen == []


async def test_label_selector_watch_reports_transitions(
    co: client.CustomObjectsApi, ns: str
) -> None:
    start = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    for labels in ({"team": "a"}, {"team": "a", "x": "y"}, {"team": None}):
        await co.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            {"metadata": {"labels": labels}},
            _content_type=MERGE,
        )
    seen = await widget_events(
        co,
        ns,
        label_selector="team=a",
        resource_version=start["metadata"]["resourceVersion"],
        count=3,
    )
    assert [e["type"] for e in seen] == ["ADDED", "MODIFIED", "DELETED"]
    assert seen[2]["object"]["metadata"]["labels"] == {"team": "a", "x": "y"}
    assert int(seen[2]["object"]["metadata"]["resourceVersion"]) > int(
        seen[1]["object"]["metadata"]["resourceVersion"]
    )


async def test_field_selector_on_metadata_name_filters_a_watch(
    co: client.CustomObjectsApi, ns: str
) -> None:
    for name in ("a", "b"):
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget(name))
    seen = await widget_events(co, ns, field_selector="metadata.name=b", count=1)
    assert seen[0]["object"]["metadata"]["name"] == "b"


async def test_field_selector_on_other_custom_resource_field_is_400(
    co: client.CustomObjectsApi, ns: str
) -> None:
    with pytest.raises(client.ApiException) as exc:
        await co.list_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, field_selector="spec.size=1"
        )
    assert exc.value.status == 400
    assert "field label not supported: spec.size" in status_of(exc.value)["message"]


async def test_watch_lines_are_compact_json(kube: KubeEmulator, ns: str) -> None:
    kube.apply({**widget("w"), "metadata": {"name": "w", "namespace": ns}})
    url = f"{kube.url}/apis/{GROUP}/{VERSION}/namespaces/{ns}/{WIDGETS}?watch=1"
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as resp,
    ):
        line = await resp.content.readline()
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "application/json"
    assert line.endswith(b"\n")
    event = json.loads(line)
    assert line == json.dumps(event, separators=(",", ":")).encode() + b"\n"
    assert event["type"] == "ADDED"


async def test_force_gone_ends_open_watches_with_410(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    start = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    baseline = len(kube.store.subscriptions)
    watching = asyncio.create_task(
        widget_events(co, ns, resource_version=start["metadata"]["resourceVersion"], count=1)
    )
    await wait_for(lambda: len(kube.store.subscriptions) > baseline)
    kube.faults.force_gone()
    with pytest.raises(client.ApiException) as exc:
        await watching
    assert exc.value.status == 410


async def test_force_gone_expires_older_resource_versions(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    start = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("v"))
    kube.faults.force_gone()
    with pytest.raises(client.ApiException) as exc:
        await widget_events(co, ns, resource_version=start["metadata"]["resourceVersion"], count=1)
    assert exc.value.status == 410


async def test_drop_watches_cuts_the_connection(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    baseline = len(kube.store.subscriptions)
    watching = asyncio.create_task(widget_events(co, ns, count=1))
    await wait_for(lambda: len(kube.store.subscriptions) > baseline)
    kube.faults.drop_watches()
    with pytest.raises(aiohttp.ClientPayloadError):
        await watching


async def test_events_queued_when_a_bookmark_falls_due_are_all_delivered(namespace: str) -> None:
    # With a zero bookmark interval a bookmark is due whenever the handler wakes, so events
    # queued together meet a due bookmark: the state in which the handler used to spin without
    # delivering anything until the watch timed out.
    async with KubeEmulator(bookmark_interval=0.0) as kube:
        kube.apply_crds([FIXTURES / "widgets-crd.yaml"])
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply({**widget("seed"), "metadata": {"name": "seed", "namespace": namespace}})
        url = (
            f"{kube.url}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{WIDGETS}"
            f"?watch=true&allowWatchBookmarks=true&resourceVersion={kube.store.rv}"
        )
        headers = {"Authorization": f"Bearer {kube.admin_token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as resp,
        ):
            first = json.loads(await resp.content.readline())
            assert first["type"] == "BOOKMARK"
            for name in ("w0", "w1", "w2"):
                kube.apply({**widget(name), "metadata": {"name": name, "namespace": namespace}})
            added: list[str] = []
            while len(added) < 3:
                event = json.loads(await resp.content.readline())
                if event["type"] == "ADDED":
                    added.append(event["object"]["metadata"]["name"])
    assert added == ["w0", "w1", "w2"]
