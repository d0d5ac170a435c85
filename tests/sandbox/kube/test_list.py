"""Checklist items 8-10: selectors, paging with limit/continue, and Status error objects."""

from __future__ import annotations

import json

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import GROUP, TIMEOUT, VERSION, WIDGETS, status_of, widget

pytestmark = pytest.mark.usefixtures("widgets")


@pytest.fixture
def labelled(kube: KubeEmulator, ns: str, widgets: None) -> None:
    for name, labels in (
        ("a", {"tier": "web", "env": "prod"}),
        ("b", {"tier": "db", "env": "prod"}),
        ("c", {"tier": "web"}),
    ):
        body = widget(name)
        body["metadata"] = {"name": name, "namespace": ns, "labels": labels}
        kube.apply(body)


@pytest.mark.usefixtures("labelled")
@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("tier=web", ["a", "c"]),
        ("tier==web", ["a", "c"]),
        ("tier!=web", ["b"]),
        ("env", ["a", "b"]),
        ("!env", ["c"]),
        ("tier in (db,cache)", ["b"]),
        ("tier notin (db)", ["a", "c"]),
        ("env notin (prod)", ["c"]),
        ("tier=web,env=prod", ["a"]),
        ("", ["a", "b", "c"]),
    ],
)
async def test_label_selectors(
    co: client.CustomObjectsApi, ns: str, selector: str, names: list[str]
) -> None:
    got = await co.list_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, label_selector=selector
    )
    assert [i["metadata"]["name"] for i in got["items"]] == names


@pytest.mark.usefixtures("labelled")
async def test_list_pages_keep_the_first_resource_version(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    first = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 1
    kube.apply({**widget("d"), "metadata": {"name": "d", "namespace": ns}})
    second = await co.list_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, limit=2, _continue=first["metadata"]["continue"]
    )
    assert [i["metadata"]["name"] for i in second["items"]] == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in second["metadata"]


@pytest.mark.usefixtures("labelled")
async def test_expired_continue_token_is_410(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    first = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, limit=1)
    kube.apply({**widget("d"), "metadata": {"name": "d", "namespace": ns}})
    kube.faults.force_gone()
    with pytest.raises(client.ApiException) as exc:
        await co.list_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, limit=1, _continue=first["metadata"]["continue"]
        )
    assert exc.value.status == 410
    assert status_of(exc.value)["reason"] == "Expired"


async def test_list_across_namespaces(kube: KubeEmulator, co: client.CustomObjectsApi) -> None:
    for ns in ("n1", "n2"):
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        kube.apply({**widget("w"), "metadata": {"name": "w", "namespace": ns}})
    got = await co.list_custom_object_for_all_namespaces(GROUP, VERSION, WIDGETS)
    assert [i["metadata"]["namespace"] for i in got["items"]] == ["n1", "n2"]


async def test_pod_field_selectors(kube: KubeEmulator, core: client.CoreV1Api, ns: str) -> None:
    for name, node in (("p1", "n1"), ("p2", "n2")):
        await core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            },
        )
    got = await core.list_namespaced_pod(ns, field_selector="spec.nodeName=n2")
    assert [p.metadata.name for p in got.items] == ["p2"]


@pytest.mark.parametrize(
    ("method", "path", "code", "reason"),
    [
        ("GET", "/apis/test.example.com/v1/namespaces/default/widgets/nope", 404, "NotFound"),
        ("GET", "/apis/nothing.example.com/v1/things", 404, "NotFound"),
        ("POST", "/api/v1/namespaces/default/configmaps", 400, "BadRequest"),
        ("PUT", "/api/v1/namespaces/default/configmaps", 405, "MethodNotAllowed"),
        ("GET", "/api/v1/pods?labelSelector=a%20in%20b", 400, "BadRequest"),
    ],
)
async def test_errors_are_single_line_status_objects(
    kube: KubeEmulator, method: str, path: str, code: int, reason: str
) -> None:
    headers = {"Authorization": f"Bearer {kube.admin_token}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            kube.url + path,
            headers=headers,
            data=b"not json",
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        raw = await resp.read()
    assert resp.status == code
    assert resp.headers["Content-Type"] == "application/json"
    assert raw.count(b"\n") == 1
    assert raw.endswith(b"\n")
    body = json.loads(raw)
    assert list(body)[:6] == ["kind", "apiVersion", "metadata", "status", "message", "reason"]
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        reason,
        code,
    )


async def test_missing_token_is_401_status(kube: KubeEmulator) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            kube.url + "/api/v1/namespaces", timeout=aiohttp.ClientTimeout(total=TIMEOUT)
        ) as resp,
    ):
        body = await resp.json()
    assert resp.status == 401
    assert body["reason"] == "Unauthorized"
    assert body["code"] == 401
