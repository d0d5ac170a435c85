"""Fault injection (in process and over the admin endpoint) and request accounting."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import (
    GROUP,
    TIMEOUT,
    VERSION,
    WIDGETS,
    status_of,
    wait_for,
    widget,
    widget_events,
)

pytestmark = pytest.mark.usefixtures("widgets")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (500, "InternalError"),
        (429, "TooManyRequests"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
        (409, "Conflict"),
    ],
)
async def test_injected_status_is_a_real_status_object(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str, status: int, reason: str
) -> None:
    kube.faults.inject(verb="list", resource=WIDGETS, status=status, count=1)
    with pytest.raises(client.ApiException) as exc:
        await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert exc.value.status == status
    assert status_of(exc.value)["reason"] == reason
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert listed["items"] == []


async def test_injected_status_can_carry_the_message_a_client_tells_apart(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    quota = 'pods "runner-a" is forbidden: exceeded quota: compute, requested: cpu=2'
    kube.faults.inject(verb="create", resource="pods", status=403, count=1, message=quota)
    pod = {"metadata": {"name": "runner-a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    with pytest.raises(client.ApiException) as exc:
        await core.create_namespaced_pod(ns, pod)
    assert exc.value.status == 403
    assert status_of(exc.value)["reason"] == "Forbidden"
    assert status_of(exc.value)["message"] == quota


async def test_too_many_requests_carries_retry_after(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    kube.faults.inject(status=429, count=1)
    with pytest.raises(client.ApiException) as exc:
        await core.list_namespaced_pod(ns)
    assert exc.value.headers["Retry-After"] == "1"
    assert status_of(exc.value)["details"]["retryAfterSeconds"] == 1


async def test_faults_match_verb_and_resource_only(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    kube.faults.inject(verb="create", resource=WIDGETS, status=500)
    await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    await core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    with pytest.raises(client.ApiException):
        await co.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {"size": 1},
            },
        )


async def test_error_rate_is_a_probability(namespace: str) -> None:
    ns = namespace
    async with KubeEmulator(fault_seed=7) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        kube.faults.error_rate(0.5, status=500, verb="get")
        async with client.ApiClient(await kube.configuration()) as api:
            v1 = client.CoreV1Api(api)
            failures = 0
            for _ in range(40):
                try:
                    await v1.read_namespace(ns)
                except client.ApiException:
                    failures += 1
    assert 5 < failures < 35


async def test_pause_holds_requests_until_resume(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    kube.faults.pause()
    pending = asyncio.create_task(core.read_namespace(ns))
    await wait_for(lambda: kube.faults.held == 1)
    assert not pending.done()
    kube.faults.resume()
    got = await asyncio.wait_for(pending, TIMEOUT)
    assert got.metadata.name == ns


async def test_latency_is_added_before_answering(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    kube.faults.latency(3600, verb="get", resource="namespaces")
    with pytest.raises(asyncio.TimeoutError):
        await core.read_namespace(ns, _request_timeout=0.2)


async def test_requests_are_accounted_per_verb_resource_and_user(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    kube.requests.reset()
    await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    with pytest.raises(client.ApiException):
        await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "missing")
    assert kube.requests.count(verb="list", resource=WIDGETS) == 2
    assert kube.requests.count(verb="get", resource=WIDGETS, code=404) == 1
    assert kube.requests.count(user="kubernetes-admin") == 3
    assert kube.requests.count(subresource="status") == 0
    assert kube.requests.log[0].path == f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{WIDGETS}"
    kube.requests.reset()
    assert kube.requests.count() == 0


async def admin(
    kube: KubeEmulator, action: str, body: dict[str, Any] | None = None, *, token: str | None = None
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token or kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{kube.url}/_emulator/{action}",
            json=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        return resp.status, await resp.json()


async def test_admin_endpoint_injects_and_clears_faults(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    code, rule = await admin(
        kube, "faults/inject", {"verb": "get", "resource": "namespaces", "status": 503}
    )
    assert code == 200
    assert rule["status"] == 503
    with pytest.raises(client.ApiException) as exc:
        await core.read_namespace(ns)
    assert exc.value.status == 503
    await admin(kube, "faults/clear")
    assert (await core.read_namespace(ns)).metadata.name == ns


async def test_admin_endpoint_reports_requests(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    await admin(kube, "requests/reset")
    await core.read_namespace(ns)
    code, report = await admin(kube, "requests")
    assert code == 200
    assert report == {"total": 1, "counts": {"get namespaces kubernetes-admin": 1}}


async def test_admin_endpoint_needs_the_admin_token(kube: KubeEmulator) -> None:
    code, body = await admin(kube, "faults/pause", token=kube.service_account_token("a", "b"))
    assert code == 401
    assert body["reason"] == "Unauthorized"
    assert not kube.faults.paused


@pytest.mark.parametrize("action", ["faults/drop-watches", "faults/force-gone", "faults/pause"])
async def test_admin_endpoint_actions(kube: KubeEmulator, action: str) -> None:
    code, body = await admin(kube, action)
    assert (code, body) == (200, {})
    assert kube.faults.paused is (action == "faults/pause")


async def test_an_open_watch_is_accounted_once_established(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    kube.requests.reset()
    watching = asyncio.create_task(widget_events(co, ns, count=1))
    await wait_for(lambda: kube.requests.count(verb="watch", resource=WIDGETS) == 1)
    assert not watching.done()
    kube.apply(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        }
    )
    await watching
    assert kube.requests.count(verb="watch", resource=WIDGETS, namespace=ns) == 1


async def test_requests_record_the_patch_content_type(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    kube.apply(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns},
            "spec": {"size": 1},
        }
    )
    await co.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        WIDGETS,
        "w",
        {"status": {"count": 1}},
        _content_type="application/merge-patch+json",
    )
    merge = kube.requests.count(
        verb="patch", subresource="status", content_type="application/merge-patch+json"
    )
    json_patch = kube.requests.count(verb="patch", content_type="application/json-patch+json")
    assert (merge, json_patch) == (1, 0)


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"nope": 1}'])
async def test_admin_endpoint_refuses_bad_bodies(kube: KubeEmulator, body: bytes) -> None:
    headers = {"Authorization": f"Bearer {kube.admin_token}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{kube.url}/_emulator/faults/inject",
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        status = await resp.json()
    assert (resp.status, status["reason"]) == (400, "BadRequest")
    assert kube.faults.rules == []


async def test_frozen_caches_cut_the_watch_and_refuse_list_and_watch_until_the_block_ends(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    baseline = len(kube.store.subscriptions)
    watching = asyncio.create_task(widget_events(co, ns, count=1))
    await wait_for(lambda: len(kube.store.subscriptions) > baseline)
    with kube.faults.frozen_caches(WIDGETS):
        with pytest.raises(aiohttp.ClientPayloadError):
            await watching
        for call in (
            co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS),
            widget_events(co, ns, count=1),
        ):
            with pytest.raises(client.ApiException) as exc:
                await call
            assert exc.value.status == 500
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
        await core.list_namespaced_pod(ns)
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert [w["metadata"]["name"] for w in listed["items"]] == ["w"]
