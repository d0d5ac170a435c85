"""The garbage collector's requests, counted as kube-controller-manager sends them
(docs/sandbox.md#the-garbage-collectors-requests) when the request log is given to it."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.gc import GC_USER
from tests.sandbox.kube.conftest import GROUP, VERSION, WIDGETS, wait_for, widget
from tests.sandbox.kube.test_delete import owned

pytestmark = pytest.mark.usefixtures("widgets")


def gc_requests(kube: KubeEmulator) -> list[tuple[str, str, int]]:
    return [(r.verb, r.resource, r.code) for r in kube.requests.log if r.user == GC_USER]


async def test_background_collection_reads_then_deletes_each_dependent(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    kube.controllers.requests = kube.requests
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    for name in ("a", "b"):
        await core.create_namespaced_config_map(ns, owned(name, owner))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Background"
    )
    await wait_for(
        lambda: all(kube.store.get(("", "configmaps"), ns, n) is None for n in ("a", "b"))
    )
    assert (
        gc_requests(kube)
        == [
            ("get", "configmaps", 200),
            ("delete", "configmaps", 200),
        ]
        * 2
    )


async def test_foreground_deletion_adds_the_owners_finalizer_removal(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    kube.controllers.requests = kube.requests
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("a", owner, block=True))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Foreground"
    )
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    assert gc_requests(kube) == [
        ("get", "configmaps", 200),
        ("delete", "configmaps", 200),
        ("get", WIDGETS, 200),
        ("patch", WIDGETS, 200),
    ]


async def test_uncounted_unless_asked(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("a", owner))
    await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "o")
    await wait_for(lambda: kube.store.get(("", "configmaps"), ns, "a") is None)
    assert gc_requests(kube) == []
