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


# Measured on kube-controller-manager 1.32 (BENCHMARKS.md, "API load per job on a real control
# plane"): besides each dependent's GET and DELETE, a foreground deletion reads the owner on every
# pass over it (when it starts, and after each dependent's delete event), reads it again before
# each dependent's DELETE (the owner still exists, so it is not in the absent-owner cache), and
# reads it once more before the PATCH that removes its finalizer.
OWNER_PASS = ("get", WIDGETS, 200)
FINALIZER_REMOVED = [("get", WIDGETS, 200), ("patch", WIDGETS, 200)]


async def test_foreground_deletion_reads_the_owner_on_each_pass(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    kube.controllers.requests = kube.requests
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    for name in ("a", "b"):
        await core.create_namespaced_config_map(ns, owned(name, owner, block=True))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Foreground"
    )
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    each_dependent = [
        ("get", "configmaps", 200),
        ("get", WIDGETS, 200),
        ("delete", "configmaps", 200),
    ]
    assert gc_requests(kube) == [
        OWNER_PASS,
        *each_dependent,
        *each_dependent,
        # "a" gone: "b" still blocks; "b" gone: the finalizer goes.
        OWNER_PASS,
        OWNER_PASS,
        *FINALIZER_REMOVED,
    ]


async def test_foreground_deletion_without_dependents_removes_the_finalizer_at_once(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    kube.controllers.requests = kube.requests
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Foreground"
    )
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    assert gc_requests(kube) == [OWNER_PASS, *FINALIZER_REMOVED]


async def test_a_dependent_that_stops_blocking_lets_the_owner_go(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("a", owner, block=True))
    # Held by another finalizer, "a" is deleted but stays, blocking the owner.
    await core.patch_namespaced_config_map("a", ns, {"metadata": {"finalizers": ["test/hold"]}})
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Foreground"
    )
    await wait_for(
        lambda: bool(
            (kube.store.get(("", "configmaps"), ns, "a") or {})["metadata"].get("deletionTimestamp")
        )
    )
    unblocked = [dict(owned("a", owner)["metadata"]["ownerReferences"][0])]
    await core.patch_namespaced_config_map("a", ns, {"metadata": {"ownerReferences": unblocked}})
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    await core.patch_namespaced_config_map("a", ns, {"metadata": {"finalizers": None}})


async def test_orphaning_patches_each_dependent_then_the_owner(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    kube.controllers.requests = kube.requests
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    for name in ("a", "b"):
        await core.create_namespaced_config_map(ns, owned(name, owner, block=True))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Orphan"
    )
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    assert gc_requests(kube) == [("patch", "configmaps", 200)] * 2 + FINALIZER_REMOVED


async def test_uncounted_unless_asked(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("a", owner))
    await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "o")
    await wait_for(lambda: kube.store.get(("", "configmaps"), ns, "a") is None)
    assert gc_requests(kube) == []
