"""`metadata.managedFields` as kube-apiserver records them (docs/sandbox-kube.md#field-managers):
the manager is `?fieldManager=` or the User-Agent's prefix; a changed field moves to its writer;
status writes are entries of their own."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import GROUP, JSON_PATCH, MERGE, VERSION, WIDGETS, widget

Obj = dict[str, Any]

pytestmark = pytest.mark.usefixtures("widgets")


async def open_api(kube: KubeEmulator, user_agent: str) -> client.ApiClient:
    api = client.ApiClient(await kube.configuration())
    api.user_agent = user_agent
    return api


def entries(obj: Obj) -> dict[tuple[str, str, str], Obj]:
    """The managedFields entries by (manager, operation, subresource): their fieldsV1."""
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
        for e in obj["metadata"].get("managedFields") or []
    }


async def test_create_patch_and_status_write_record_their_managers(
    kube: KubeEmulator, ns: str
) -> None:
    first = await open_api(kube, "first-tool/1.2.3 (linux)")
    second = await open_api(kube, "second-tool/0.1")
    try:
        co1, co2 = client.CustomObjectsApi(first), client.CustomObjectsApi(second)
        body = widget("w", size=1, color="red")
        # A client cannot write the record itself: its managedFields are ignored.
        body["metadata"]["managedFields"] = [{"manager": "forged", "operation": "Update"}]
        created = await co1.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
        [entry] = created["metadata"]["managedFields"]
        assert entry["manager"] == "first-tool"
        assert entry["operation"] == "Update"
        assert entry["apiVersion"] == f"{GROUP}/{VERSION}"
        assert entry["fieldsType"] == "FieldsV1"
        assert entry["time"] == created["metadata"]["creationTimestamp"]
        assert "subresource" not in entry
        # mode is the schema's default: set on create, so the creator's.
        assert entry["fieldsV1"] == {
            "f:spec": {"f:size": {}, "f:color": {}, "f:mode": {}},
        }

        # The second manager changes size: it moves to the second; color is set to its own
        # value again, which changes nothing and so stays the first's.
        patched = await co2.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            {"spec": {"size": 2, "color": "red"}},
            _content_type=MERGE,
        )
        assert entries(patched) == {
            ("first-tool", "Update", ""): {"f:spec": {"f:color": {}, "f:mode": {}}},
            ("second-tool", "Update", ""): {"f:spec": {"f:size": {}}},
        }

        # A status write is an entry of its own, with `subresource: status`.
        await co1.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            {"status": {"phase": "Pending", "count": 1}},
            _content_type=MERGE,
        )
        status_written = await co2.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, WIDGETS, "w", {"status": {"phase": "Running"}}, _content_type=MERGE
        )
        assert entries(status_written) == {
            ("first-tool", "Update", ""): {"f:spec": {"f:color": {}, "f:mode": {}}},
            ("second-tool", "Update", ""): {"f:spec": {"f:size": {}}},
            ("first-tool", "Update", "status"): {"f:status": {"f:count": {}}},
            ("second-tool", "Update", "status"): {"f:status": {"f:phase": {}}},
        }

        # Removing the first's last spec fields drops its entry; fieldManager names the writer.
        removed = await co2.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            [
                {"op": "remove", "path": "/spec/color"},
                {"op": "replace", "path": "/spec/mode", "value": "slow"},
            ],
            field_manager="named",
            _content_type=JSON_PATCH,
        )
        assert ("first-tool", "Update", "") not in entries(removed)
        assert entries(removed)[("named", "Update", "")] == {"f:spec": {"f:mode": {}}}

        # A plain GET serves the record too.
        read = await co1.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w")
        assert read["metadata"]["managedFields"] == removed["metadata"]["managedFields"]
    finally:
        await first.close()
        await second.close()


async def test_server_side_apply_is_recorded_as_apply(kube: KubeEmulator, ns: str) -> None:
    api = await open_api(kube, "kubectl/v1.31.0 (linux/amd64) kubernetes/abc")
    try:
        co = client.CustomObjectsApi(api)
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w", size=1))
        applied = await co.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            WIDGETS,
            "w",
            widget("w", size=3),
            field_manager="applier",
            _content_type="application/apply-patch+yaml",
        )
        managed = applied["metadata"]["managedFields"]
        # Apply entries come first.
        assert [(e["manager"], e["operation"]) for e in managed] == [
            ("applier", "Apply"),
            ("kubectl", "Update"),
        ]
        assert entries(applied)[("applier", "Apply", "")] == {"f:spec": {"f:size": {}}}
        assert entries(applied)[("kubectl", "Update", "")] == {"f:spec": {"f:mode": {}}}
    finally:
        await api.close()


async def test_a_merge_patch_over_plain_http_records_the_user_agent_prefix(
    kube: KubeEmulator, ns: str, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    # kubernetes-asyncio's own User-Agent: "OpenAPI-Generator/<version>/python".
    patched = core.api_client.sanitize_for_serialization(
        await core.patch_namespaced_config_map("c", ns, {"data": {"b": "2"}}, _content_type=MERGE)
    )
    assert entries(patched) == {
        ("OpenAPI-Generator", "Update", ""): {"f:data": {"f:a": {}, "f:b": {}}}
    }
