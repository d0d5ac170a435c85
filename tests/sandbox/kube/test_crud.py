"""Items 1-4 of docs/sandbox-kube.md#conformance-checklist through kubernetes-asyncio: create,
update, generation, status subresource."""

from __future__ import annotations

import re

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.registry import GENERATE_NAME_ATTEMPTS
from tests.sandbox.kube.conftest import (
    GROUP,
    JSON_PATCH,
    MERGE,
    VERSION,
    WIDGETS,
    status_of,
    widget,
    widget_events,
)

pytestmark = pytest.mark.usefixtures("widgets")


async def test_create_answers_201_with_server_metadata(
    co: client.CustomObjectsApi, ns: str
) -> None:
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    meta = obj["metadata"]
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert meta["resourceVersion"].isdigit()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])
    assert meta["generation"] == 1
    assert meta["namespace"] == ns


async def test_create_twice_is_409_already_exists(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    assert exc.value.status == 409
    body = status_of(exc.value)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'widgets.test.example.com "w1" already exists'
    assert body["details"] == {"name": "w1", "group": GROUP, "kind": WIDGETS}


async def test_generate_name_appends_five_characters(co: client.CustomObjectsApi, ns: str) -> None:
    body = widget("")
    body["metadata"] = {"generateName": "w-"}
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    assert re.fullmatch(r"w-[bcdfghjklmnpqrstvwxz2456789]{5}", obj["metadata"]["name"])


async def test_create_in_missing_namespace_is_404(co: client.CustomObjectsApi) -> None:
    with pytest.raises(client.ApiException) as exc:
        await co.create_namespaced_custom_object(GROUP, VERSION, "nope", WIDGETS, widget("w"))
    assert exc.value.status == 404
    assert status_of(exc.value)["message"] == 'namespaces "nope" not found'


async def test_create_drops_status_when_status_is_a_subresource(
    co: client.CustomObjectsApi, ns: str
) -> None:
    body = widget("w1")
    body["status"] = {"phase": "Ready"}
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    assert "status" not in obj


async def test_put_with_stale_resource_version_is_409(co: client.CustomObjectsApi, ns: str) -> None:
    first = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", {"spec": {"size": 2}}, _content_type=MERGE
    )
    first["spec"]["size"] = 3
    with pytest.raises(client.ApiException) as exc:
        await co.replace_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1", first)
    assert exc.value.status == 409
    body = status_of(exc.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on widgets.test.example.com "w1": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )


async def test_put_custom_resource_without_resource_version_is_422(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await co.replace_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1", widget("w1"))
    assert exc.value.status == 422
    assert status_of(exc.value)["details"]["causes"][0]["field"] == "metadata.resourceVersion"


async def test_put_with_current_resource_version_succeeds(
    co: client.CustomObjectsApi, ns: str
) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    cur["spec"]["size"] = 5
    new = await co.replace_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1", cur)
    assert new["spec"]["size"] == 5
    assert int(new["metadata"]["resourceVersion"]) > int(cur["metadata"]["resourceVersion"])


async def test_patch_carrying_stale_resource_version_is_409(
    co: client.CustomObjectsApi, ns: str
) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", {"spec": {"size": 2}}, _content_type=MERGE
    )
    stale = {
        "metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]},
        "spec": {"size": 3},
    }
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, "w1", stale, _content_type=MERGE
        )
    assert exc.value.status == 409


async def test_lease_replace_with_stale_resource_version_is_409(
    kube_api: client.ApiClient, ns: str
) -> None:
    leases = client.CoordinationV1Api(kube_api)
    body = {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}
    first = await leases.create_namespaced_lease(ns, body, pretty=True)
    first.spec.holder_identity = "b"
    await leases.replace_namespaced_lease("leader", ns, first)
    first.spec.holder_identity = "c"
    with pytest.raises(client.ApiException) as exc:
        await leases.replace_namespaced_lease("leader", ns, first)
    assert exc.value.status == 409
    assert status_of(exc.value)["code"] == 409


@pytest.mark.parametrize(
    ("patch", "bumps"),
    [
        ({"spec": {"size": 9}}, True),
        ({"metadata": {"labels": {"a": "b"}}}, False),
        ({"metadata": {"annotations": {"a": "b"}}}, False),
        ({"metadata": {"finalizers": ["x.io/f"]}}, False),
        ({"status": {"phase": "Ignored"}}, False),
    ],
)
async def test_generation_bumps_only_on_spec_change(
    co: client.CustomObjectsApi, ns: str, patch: dict[str, object], bumps: bool
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    obj = await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", patch, _content_type=MERGE
    )
    assert obj["metadata"]["generation"] == (2 if bumps else 1)


async def test_status_write_never_bumps_generation(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    obj = await co.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, WIDGETS, "w1", {"status": {"phase": "Ready"}}, _content_type=MERGE
    )
    assert obj["status"] == {"phase": "Ready"}
    assert obj["metadata"]["generation"] == 1


async def test_no_op_patch_keeps_resource_version_and_emits_no_event(
    co: client.CustomObjectsApi, ns: str
) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    rv = cur["metadata"]["resourceVersion"]
    same = await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", {"spec": {"size": 1}}, _content_type=MERGE
    )
    assert same["metadata"]["resourceVersion"] == rv
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("marker"))
    seen = await widget_events(co, ns, resource_version=rv, count=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [("ADDED", "marker")]


async def test_status_write_ignores_spec_and_labels(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    obj = await co.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        ns,
        WIDGETS,
        "w1",
        {"metadata": {"labels": {"x": "y"}}, "spec": {"size": 7}, "status": {"count": 3}},
        _content_type=MERGE,
    )
    assert obj["spec"]["size"] == 1
    assert "labels" not in obj["metadata"]
    assert obj["status"] == {"count": 3}


async def test_main_resource_write_ignores_status(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    await co.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, WIDGETS, "w1", {"status": {"count": 1}}, _content_type=MERGE
    )
    obj = await co.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        WIDGETS,
        "w1",
        {"spec": {"size": 4}, "status": {"count": 99}},
        _content_type=MERGE,
    )
    assert obj["spec"]["size"] == 4
    assert obj["status"] == {"count": 1}


async def test_replace_status_keeps_spec(co: client.CustomObjectsApi, ns: str) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    cur["spec"]["size"] = 50
    cur["status"] = {"phase": "Done"}
    obj = await co.replace_namespaced_custom_object_status(GROUP, VERSION, ns, WIDGETS, "w1", cur)
    assert obj["spec"]["size"] == 1
    assert obj["status"] == {"phase": "Done"}


async def test_status_subresource_missing_without_declaration(
    co: client.CustomObjectsApi, ns: str
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "status": {"kept": True},
    }
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, "gadgets", body)
    assert obj["status"] == {"kept": True}
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "gadgets", "g", {"status": {}}, _content_type=MERGE
        )
    assert exc.value.status == 404


async def test_pod_status_write_keeps_spec(core: client.CoreV1Api, ns: str) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "elsewhere"},
    }
    await core.create_namespaced_pod(ns, pod)
    patched = await core.patch_namespaced_pod_status(
        "p", ns, {"spec": {"nodeName": "other"}, "status": {"phase": "Running"}}
    )
    assert patched.spec.node_name == "elsewhere"
    assert patched.status.phase == "Running"


async def test_secret_string_data_folds_into_data(core: client.CoreV1Api, ns: str) -> None:
    secret = await core.create_namespaced_secret(
        ns, {"metadata": {"name": "s"}, "stringData": {"token": "abc"}}
    )
    assert secret.data == {"token": "YWJj"}
    assert secret.type == "Opaque"


async def test_json_patch_test_op_guards_a_write(co: client.CustomObjectsApi, ns: str) -> None:
    cur = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    rv = cur["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "replace", "path": "/spec/size", "value": 8},
    ]
    obj = await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", ops, _content_type=JSON_PATCH
    )
    assert obj["spec"]["size"] == 8
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, "w1", ops, _content_type=JSON_PATCH
        )
    assert exc.value.status == 422


async def test_direct_setup_goes_through_the_write_path(kube: KubeEmulator, ns: str) -> None:
    obj = kube.apply({**widget("w1"), "metadata": {"name": "w1", "namespace": ns}})
    assert obj["metadata"]["generation"] == 1
    assert kube.store.get((GROUP, WIDGETS), ns, "w1") is not None


async def test_status_change_bumps_generation_without_a_status_subresource(
    co: client.CustomObjectsApi, ns: str
) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "status": {"phase": "A"},
    }
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, "gadgets", body)
    obj = await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "gadgets", "g", {"status": {"phase": "B"}}, _content_type=MERGE
    )
    assert obj["metadata"]["generation"] == 2


async def test_a_generated_name_already_taken_is_drawn_again(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    """kube-apiserver draws again (RetryGenerateName, on since 1.31): at 5,000 runners of one
    generateName, a collision is more likely than not, and a 409 lost one runner for good."""
    body = widget("")
    body["metadata"] = {"generateName": "w-"}
    draws = iter(["bbbbb", "bbbbb", "bbbbb", "ccccc"])
    kube.registry.generate_suffix = lambda: next(draws)
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)

    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)

    assert obj["metadata"]["name"] == "w-ccccc"
    assert next(draws, None) is None


async def test_generated_names_all_taken_are_a_conflict(
    kube: KubeEmulator, co: client.CustomObjectsApi, ns: str
) -> None:
    body = widget("")
    body["metadata"] = {"generateName": "w-"}
    kube.registry.generate_suffix = lambda: "bbbbb"
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    drawn = 0

    def same() -> str:
        nonlocal drawn
        drawn += 1
        return "bbbbb"

    kube.registry.generate_suffix = same
    with pytest.raises(client.ApiException) as exc:
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)

    assert exc.value.status == 409
    assert drawn == GENERATE_NAME_ATTEMPTS
