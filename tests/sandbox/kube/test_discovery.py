"""Discovery, /version, OpenAPI answers, events, deletecollection and query parsing."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import GROUP, TIMEOUT, VERSION, WIDGETS, events, widget

pytestmark = pytest.mark.usefixtures("widgets")
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


async def raw(
    kube: KubeEmulator, path: str, *, accept: str = "application/json"
) -> tuple[int, str, Any]:
    headers = {"Authorization": f"Bearer {kube.admin_token}", "Accept": accept}
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            kube.url + path, headers=headers, timeout=aiohttp.ClientTimeout(total=TIMEOUT)
        ) as resp,
    ):
        body = await resp.read()
    return resp.status, resp.headers.get("Content-Type", ""), json.loads(body) if body else None


async def test_custom_resources_appear_in_legacy_discovery(kube: KubeEmulator) -> None:
    _, _, groups = await raw(kube, "/apis")
    group = next(g for g in groups["groups"] if g["name"] == GROUP)
    assert group["preferredVersion"] == {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
    _, _, resources = await raw(kube, f"/apis/{GROUP}/{VERSION}")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["widgets"]["kind"] == "Widget"
    assert by_name["widgets"]["namespaced"] is True
    assert by_name["widgets"]["shortNames"] == ["wd"]
    assert by_name["widgets/status"]["verbs"] == ["get", "patch", "update"]


async def test_core_discovery_lists_subresources(kube: KubeEmulator) -> None:
    _, _, versions = await raw(kube, "/api")
    assert versions["versions"] == ["v1"]
    _, _, core = await raw(kube, "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods", "pods/status", "serviceaccounts/token", "namespaces", "secrets"} <= names


async def test_aggregated_discovery_when_asked(kube: KubeEmulator) -> None:
    status, ctype, doc = await raw(kube, "/apis", accept=f"{AGGREGATED},application/json")
    assert status == 200
    assert ctype.startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    assert doc["kind"] == "APIGroupDiscoveryList"
    group = next(i for i in doc["items"] if i["metadata"]["name"] == GROUP)
    resource = group["versions"][0]["resources"][0]
    assert (resource["resource"], resource["scope"]) == ("widgets", "Namespaced")
    assert resource["subresources"][0]["subresource"] == "status"


async def test_version_and_openapi(kube: KubeEmulator) -> None:
    """/openapi/v3 is served now (tests/sandbox/kube/test_openapi.py); v2 stays empty."""
    status, _, version = await raw(kube, "/version")
    assert (status, version["major"], version["minor"]) == (200, "1", "32")
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(kube.url + "/openapi/v2", headers=headers) as resp:
            assert (resp.status, await resp.read()) == (200, b"")
            assert resp.headers["Content-Type"] == "application/octet-stream"
        async with http.get(kube.url + "/openapi/v3", headers=headers) as resp:
            assert resp.status == 200


async def test_crd_reports_established(kube_api: client.ApiClient) -> None:
    crd = await client.ApiextensionsV1Api(kube_api).read_custom_resource_definition(
        "widgets.test.example.com"
    )
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd.status.stored_versions == ["v1"]


async def first_line(kube: KubeEmulator, path: str) -> Any:
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            kube.url + path, headers=headers, timeout=aiohttp.ClientTimeout(total=TIMEOUT)
        ) as resp,
    ):
        return json.loads(await resp.content.readline())


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ("True", "ADDED"),
        ("true", "ADDED"),
        ("1", "ADDED"),
        ("", "ADDED"),
        ("false", "NamespaceList"),
        ("FALSE", "NamespaceList"),
        ("0", "NamespaceList"),
    ],
)
async def test_query_booleans_are_parsed_the_go_way(
    kube: KubeEmulator, value: str, answer: str
) -> None:
    first = await first_line(kube, f"/api/v1/namespaces?watch={value}")
    assert first.get("type", first.get("kind")) == answer


@pytest.mark.parametrize("group", ["core", "events.k8s.io"])
async def test_events_are_accepted_and_listable(
    kube_api: client.ApiClient, ns: str, group: str
) -> None:
    body = {"metadata": {"name": "e1"}, "reason": "Started", "type": "Normal"}
    if group == "core":
        body["involvedObject"] = {"kind": "Pod", "name": "p", "namespace": ns}
        body["message"] = "started"
        core = client.CoreV1Api(kube_api)
        await core.create_namespaced_event(ns, body)
        listed = await core.list_namespaced_event(ns)
    else:
        body["regarding"] = {"kind": "Pod", "name": "p", "namespace": ns}
        body["note"] = "started"
        body["eventTime"] = "2026-01-01T00:00:00.000000Z"
        body["reportingController"] = "test"
        body["reportingInstance"] = "test-1"
        body["action"] = "Start"
        api = client.EventsV1Api(kube_api)
        await api.create_namespaced_event(ns, body)
        listed = await api.list_namespaced_event(ns)
    assert [e.metadata.name for e in listed.items] == ["e1"]


async def test_delete_collection_honours_the_label_selector(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    for name, team in (("a", "x"), ("b", "y"), ("c", "x")):
        await core.create_namespaced_config_map(
            ns, {"metadata": {"name": name, "labels": {"team": team}}}
        )
    await core.delete_collection_namespaced_config_map(ns, label_selector="team=x")
    left = await core.list_namespaced_config_map(ns)
    assert sorted(c.metadata.name for c in left.items) == ["b", "kube-root-ca.crt"]


async def test_send_initial_events_ends_with_a_marked_bookmark(
    core: client.CoreV1Api, ns: str
) -> None:
    await core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    seen = await events(
        core.list_namespaced_config_map,
        ns,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        count=3,
    )
    assert [e["type"] for e in seen] == ["ADDED", "ADDED", "BOOKMARK"]
    marker = seen[2]["object"]["metadata"]["annotations"]
    assert marker == {"k8s.io/initial-events-end": "true"}


async def test_new_namespace_gets_default_service_account_and_root_ca(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    sa = await core.read_namespaced_service_account("default", ns)
    cm = await core.read_namespaced_config_map("kube-root-ca.crt", ns)
    assert sa.metadata.name == "default"
    assert "ca.crt" in cm.data


async def test_tls_serves_the_api_to_the_client(namespace: str) -> None:
    async with KubeEmulator(tls=True) as kube:
        assert kube.url.startswith("https://127.0.0.1:")
        token = kube.service_account_token("default", "default")
        async with client.ApiClient(await kube.configuration(token=token)) as api:
            review = await client.AuthenticationV1Api(api).create_self_subject_review({})
    assert review.status.user_info.username == "system:serviceaccount:default:default"


async def test_a_port_in_use_fails_start_and_leaves_nothing_running() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        before = asyncio.all_tasks()
        emulator = KubeEmulator(port=taken.getsockname()[1])
        with pytest.raises(OSError, match=r"(?i)address already in use"):
            await emulator.start()
        leaked = asyncio.all_tasks() - before
    assert [task.get_name() for task in leaked] == []
    assert emulator.url == ""


async def test_crd_can_be_recreated_under_the_same_name(
    kube: KubeEmulator, kube_api: client.ApiClient, co: client.CustomObjectsApi, ns: str
) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    crd = await ext.read_custom_resource_definition("widgets.test.example.com")
    await ext.delete_custom_resource_definition("widgets.test.example.com")
    body = kube_api.sanitize_for_serialization(crd)
    body["metadata"] = {"name": "widgets.test.example.com"}
    body.pop("status")
    await ext.create_custom_resource_definition(body)
    created = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    assert created["metadata"]["generation"] == 1
