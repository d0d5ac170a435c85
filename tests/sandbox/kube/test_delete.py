"""Checklist item 6 and garbage collection: finalizers, deletionTimestamp, preconditions,
propagation policies and cascading deletion by ownerReferences."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import (
    GROUP,
    JSON_PATCH,
    MERGE,
    VERSION,
    WIDGETS,
    events,
    status_of,
    wait_for,
    widget,
    widget_events,
)

pytestmark = pytest.mark.usefixtures("widgets")


def with_finalizer(name: str) -> dict[str, Any]:
    body = widget(name)
    body["metadata"]["finalizers"] = ["test.example.com/hold"]
    return body


async def test_delete_with_finalizer_marks_the_object(co: client.CustomObjectsApi, ns: str) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, with_finalizer("w"))
    rv = cur["metadata"]["resourceVersion"]
    deleted = await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["generation"] == 2
    still = await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    assert still["metadata"]["deletionTimestamp"] == deleted["metadata"]["deletionTimestamp"]
    seen = await widget_events(co, ns, resource_version=rv, count=1)
    assert seen[0]["type"] == "MODIFIED"
    assert seen[0]["object"]["metadata"]["deletionTimestamp"]


async def test_second_delete_is_a_no_op(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, with_finalizer("w"))
    first = await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    second = await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("content_type", "patch"),
    [
        (MERGE, {"metadata": {"finalizers": None}}),
        (JSON_PATCH, [{"op": "remove", "path": "/metadata/finalizers"}]),
    ],
)
async def test_removing_last_finalizer_deletes_with_only_a_deleted_event(
    co: client.CustomObjectsApi, ns: str, content_type: str, patch: Any
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, with_finalizer("w"))
    marked = await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    rv = marked["metadata"]["resourceVersion"]
    await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w", patch, _content_type=content_type
    )
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("marker"))
    seen = await widget_events(co, ns, resource_version=rv, count=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("DELETED", "w"),
        ("ADDED", "marker"),
    ]
    # The DELETED event is the last stored state, the finalizer still listed (seen on a real
    # kube-apiserver 1.32: the update that empties the list is never stored).
    assert (
        seen[0]["object"]["metadata"]["finalizers"] == with_finalizer("w")["metadata"]["finalizers"]
    )
    with pytest.raises(client.ApiException) as exc:
        await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    assert exc.value.status == 404


async def test_adding_a_finalizer_while_deleting_is_422(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, with_finalizer("w"))
    await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            {"metadata": {"finalizers": ["test.example.com/hold", "new.io/f"]}},
            _content_type=MERGE,
        )
    assert exc.value.status == 422
    cause = status_of(exc.value)["details"]["causes"][0]
    assert cause["field"] == "metadata.finalizers"
    assert "no new finalizers can be added if the object is being deleted" in cause["message"]


async def test_delete_without_finalizers_answers_success_status(
    co: client.CustomObjectsApi, ns: str
) -> None:
    created = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    status = await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": "w",
            "group": GROUP,
            "kind": WIDGETS,
            "uid": created["metadata"]["uid"],
        },
    }


async def test_delete_missing_object_is_404(co: client.CustomObjectsApi, ns: str) -> None:
    with pytest.raises(client.ApiException) as exc:
        await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "ghost")
    assert status_of(exc.value)["reason"] == "NotFound"


@pytest.mark.parametrize("field", ["uid", "resourceVersion"])
async def test_delete_precondition_mismatch_is_409(
    co: client.CustomObjectsApi, ns: str, field: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    with pytest.raises(client.ApiException) as exc:
        await co.delete_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, "w", body={"preconditions": {field: "other"}}
        )
    assert exc.value.status == 409
    assert "Precondition failed" in status_of(exc.value)["message"]


def owned(name: str, owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Widget",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": block,
                }
            ],
        },
        "data": {"k": "v"},
    }
    return body


async def test_background_deletion_collects_dependents(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("dep", owner))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Background"
    )
    await wait_for(lambda: kube.store.get(("", "configmaps"), ns, "dep") is None)


async def test_dependent_with_a_surviving_owner_is_kept(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    a = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("a"))
    b = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("b"))
    body = owned("dep", a)
    body["metadata"]["ownerReferences"] += owned("x", b)["metadata"]["ownerReferences"]
    await core.create_namespaced_config_map(ns, body)
    await co.delete_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "a")
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("marker"))
    await wait_for(lambda: not any(s.queue.qsize() for s in kube.store.subscriptions))
    assert kube.store.get(("", "configmaps"), ns, "dep") is not None


async def test_foreground_deletion_removes_dependents_first(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("dep", owner, block=True))
    marked = await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Foreground"
    )
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    seen = await widget_events(
        co, ns, resource_version=marked["metadata"]["resourceVersion"], count=1
    )
    assert seen[0]["type"] == "DELETED"
    assert kube.store.get(("", "configmaps"), ns, "dep") is None


async def test_orphan_deletion_strips_owner_references(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    owner = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("o"))
    await core.create_namespaced_config_map(ns, owned("dep", owner))
    await co.delete_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "o", propagation_policy="Orphan"
    )
    await wait_for(lambda: kube.store.get((GROUP, WIDGETS), ns, "o") is None)
    dep = await core.read_namespaced_config_map("dep", ns)
    assert dep.metadata.owner_references is None


async def test_namespace_deletion_removes_its_contents(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    before = await core.read_namespace(ns)
    await core.delete_namespace(ns)
    seen = await events(
        core.list_namespace,
        field_selector=f"metadata.name={ns}",
        resource_version=before.metadata.resource_version,
        count=2,
    )
    assert [(e["type"], e["object"]["status"]["phase"]) for e in seen] == [
        ("MODIFIED", "Terminating"),
        ("DELETED", "Terminating"),
    ]
    assert kube.store.get((GROUP, WIDGETS), ns, "w") is None


async def test_deleting_a_crd_deletes_its_objects(
    kube: KubeEmulator, kube_api: client.ApiClient, co: client.CustomObjectsApi, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w"))
    await client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(
        "widgets.test.example.com"
    )
    with pytest.raises(client.ApiException) as exc:
        await co.list_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS)
    assert exc.value.status == 404
    assert kube.store.get((GROUP, WIDGETS), ns, "w") is None


async def test_a_namespace_held_by_finalizers_reports_what_remains(
    kube: KubeEmulator, co: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    """The conditions kube-controller-manager 1.32 writes (seen on a real cluster): resources
    named `<resource>.<group>`, so a core kind ends in a dot."""
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, with_finalizer("w"))
    await core.create_namespaced_config_map(
        ns, {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}
    )
    await core.delete_namespace(ns)

    def conditions() -> dict[str, str] | None:
        namespace = kube.store.get(("", "namespaces"), "", ns) or {}
        found = (namespace.get("status") or {}).get("conditions") or []
        return {c["type"]: c["message"] for c in found} or None

    found = await wait_for(conditions)
    # What a client reads is what the store holds.
    read = (await core.read_namespace(ns)).status.conditions
    assert {c.type: c.message for c in read} == found
    assert found["NamespaceContentRemaining"] == (
        f"Some resources are remaining: configmaps. has 1 resource instances, "
        f"{WIDGETS}.{GROUP} has 1 resource instances"
    )
    # Nothing new gets in, Events included (the NamespaceLifecycle admission, not RBAC).
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "ConfigMap", "name": "c"}}
    with pytest.raises(client.ApiException) as refused:
        await core.create_namespaced_event(ns, event)
    assert refused.value.status == 403
    assert status_of(refused.value)["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {ns} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    assert found["NamespaceFinalizersRemaining"].startswith(
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 "
        "resource instances"
    )
