"""Fixtures for the emulator's own tests: a live namespace, the test CRDs and typed API objects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from sandbox.kube import KubeEmulator

FIXTURES = Path(__file__).parent / "fixtures"
GROUP, VERSION, WIDGETS, GADGETS = "test.example.com", "v1", "widgets", "gadgets"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TIMEOUT = 10

Obj = dict[str, Any]


@pytest.fixture
def ns(kube: KubeEmulator, namespace: str) -> str:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return namespace


@pytest.fixture
def widgets(kube: KubeEmulator) -> None:
    kube.apply_crds([FIXTURES / "widgets-crd.yaml"])


@pytest.fixture
def co(kube_api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_api)


@pytest.fixture
def core(kube_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api)


def widget(name: str, size: int = 1, **spec: Any) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }


def status_of(exc: client.ApiException) -> Obj:
    body: Obj = json.loads(exc.body)
    return body


async def events(list_call: Callable[..., Any], *args: Any, count: int, **kwargs: Any) -> list[Obj]:
    """The first `count` events of a kubernetes-asyncio watch (raw objects, dicts)."""
    out: list[Obj] = []
    w = watch.Watch()
    kwargs.setdefault("timeout_seconds", TIMEOUT)
    async with (
        asyncio.timeout(TIMEOUT),
        w.stream(list_call, *args, _request_timeout=TIMEOUT + 5, **kwargs) as stream,
    ):
        async for ev in stream:
            out.append({"type": ev["type"], "object": ev["raw_object"]})
            if len(out) >= count:
                break
    return out


async def widget_events(
    co: client.CustomObjectsApi, namespace: str, *, count: int, **kwargs: Any
) -> list[Obj]:
    """The first `count` events of a watch on the widgets of `namespace`."""
    return await events(
        co.list_namespaced_custom_object, GROUP, VERSION, namespace, WIDGETS, count=count, **kwargs
    )


async def wait_for(predicate: Callable[[], Any]) -> Any:
    """Poll an in-process condition (the emulator runs in this loop) until truthy."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.01)


@pytest.fixture
async def sa_api(kube: KubeEmulator) -> AsyncIterator[Callable[[str, str], Any]]:
    """Open ApiClients for service-account identities; all closed after the test."""
    opened: list[client.ApiClient] = []

    async def make(namespace: str, name: str) -> client.ApiClient:
        api = client.ApiClient(
            await kube.configuration(token=kube.service_account_token(namespace, name))
        )
        opened.append(api)
        return api

    yield make
    for api in opened:
        await api.close()
