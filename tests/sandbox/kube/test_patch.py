"""Checklist item 5: the PATCH formats and their failure codes, over the wire."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.sandbox.kube.conftest import (
    GROUP,
    JSON_PATCH,
    MERGE,
    VERSION,
    WIDGETS,
    Obj,
    status_of,
    widget,
)

pytestmark = pytest.mark.usefixtures("widgets")


async def patch_w1(co: client.CustomObjectsApi, ns: str, body: Any, **kwargs: Any) -> Any:
    return await co.patch_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, "w1", body, **kwargs
    )


@pytest.mark.parametrize(
    ("created", "body", "want"),
    [
        pytest.param(
            widget("w1", color="red"),
            {"spec": {"color": None}},
            {"size": 1, "mode": "fast"},
            id="null-deletes",
        ),
        pytest.param(
            widget("w1", tags=["a", "b"]),
            {"spec": {"tags": ["c"]}},
            {"size": 1, "mode": "fast", "tags": ["c"]},
            id="lists-replaced",
        ),
    ],
)
async def test_merge_patch_of_the_spec(
    co: client.CustomObjectsApi, ns: str, created: Obj, body: Obj, want: Obj
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, created)
    obj = await patch_w1(co, ns, body, _content_type=MERGE)
    assert obj["spec"] == want


async def test_merge_patch_replaces_finalizers(co: client.CustomObjectsApi, ns: str) -> None:
    body = widget("w1")
    body["metadata"]["finalizers"] = ["a.io/x", "b.io/y"]
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    obj = await patch_w1(co, ns, {"metadata": {"finalizers": ["b.io/y"]}}, _content_type=MERGE)
    assert obj["metadata"]["finalizers"] == ["b.io/y"]


@pytest.mark.parametrize(
    ("body", "kwargs", "status", "reason"),
    [
        pytest.param(
            [{"op": "test", "path": "/spec/size", "value": 2}],
            {"_content_type": JSON_PATCH},
            422,
            "Invalid",
            id="json-patch-failing-test",
        ),
        # kubernetes-asyncio's default for a dict body on a CR patch
        # (docs/sandbox-kube.md#client-quirks).
        pytest.param({"spec": {}}, {}, 400, "BadRequest", id="object-body-as-json-patch"),
        pytest.param(
            {"spec": {"size": 2}},
            {"_content_type": "application/strategic-merge-patch+json"},
            415,
            "UnsupportedMediaType",
            id="strategic-merge-on-a-custom-resource",
        ),
    ],
)
async def test_refused_patches(
    co: client.CustomObjectsApi,
    ns: str,
    body: Any,
    kwargs: dict[str, Any],
    status: int,
    reason: str,
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await patch_w1(co, ns, body, **kwargs)
    assert exc.value.status == status
    assert status_of(exc.value)["reason"] == reason


async def test_strategic_merge_patch_merges_containers_by_name(
    core: client.CoreV1Api, ns: str
) -> None:
    pod = {
        "metadata": {"name": "p", "finalizers": ["a.io/x"]},
        "spec": {
            "nodeName": "elsewhere",
            "containers": [{"name": "a", "image": "one"}, {"name": "b", "image": "two"}],
        },
    }
    await core.create_namespaced_pod(ns, pod)
    patched = await core.patch_namespaced_pod(
        "p",
        ns,
        {
            "metadata": {"finalizers": ["b.io/y"]},
            "spec": {"containers": [{"name": "b", "image": "three"}]},
        },
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "one"), ("b", "three")]
    assert patched.metadata.finalizers == ["a.io/x", "b.io/y"]


async def test_strategic_merge_patch_delete_directive(kube_api: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(kube_api)
    container = {
        "name": "a",
        "image": "one",
        "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
    }
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [container]}}
    await apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
        },
    )
    patched = await apps.patch_namespaced_deployment(
        "d",
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}]}]
                    }
                }
            }
        },
    )
    assert [e.name for e in patched.spec.template.spec.containers[0].env] == ["Y"]
    assert patched.metadata.generation == 2


async def test_pod_spec_is_immutable_but_for_images(core: client.CoreV1Api, ns: str) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "elsewhere", "containers": [{"name": "a", "image": "one"}]},
    }
    await core.create_namespaced_pod(ns, pod)
    with pytest.raises(client.ApiException) as exc:
        await core.patch_namespaced_pod("p", ns, {"spec": {"restartPolicy": "Never"}})
    assert exc.value.status == 422
    cause = status_of(exc.value)["details"]["causes"][0]
    assert cause["field"] == "spec"
    assert cause["message"].startswith("Forbidden: pod updates may not change fields")


async def test_apply_patch_creates_then_merges(co: client.CustomObjectsApi, ns: str) -> None:
    """The create answers 201, which this client's patch method does not deserialize."""
    apply = "application/apply-patch+yaml"
    await patch_w1(
        co, ns, widget("w1", size=2), _content_type=apply, field_manager="test", force=True
    )
    first = await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1")
    assert first["spec"]["size"] == 2
    second = await patch_w1(
        co, ns, widget("w1", size=3), _content_type=apply, field_manager="test", force=True
    )
    assert second["spec"]["size"] == 3


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"_content_type": "application/apply-patch+yaml"}, "fieldManager"),
        ({"_content_type": MERGE, "force": True}, "force"),
    ],
)
async def test_patch_options_are_validated(
    co: client.CustomObjectsApi, ns: str, kwargs: dict[str, Any], field: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await patch_w1(co, ns, {}, **kwargs)
    assert exc.value.status == 422
    assert status_of(exc.value)["details"]["causes"][0]["field"] == field


async def apply(co: client.CustomObjectsApi, ns: str, manager: str, **spec: Any) -> Any:
    await patch_w1(
        co,
        ns,
        widget("w1", **spec),
        _content_type="application/apply-patch+yaml",
        field_manager=manager,
    )
    return await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1")


async def test_apply_removes_fields_the_manager_stops_applying(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await apply(co, ns, "a", size=1, color="red", tags=["x"])
    obj = await apply(co, ns, "a", size=2)
    assert obj["spec"] == {"size": 2, "mode": "fast"}


async def test_apply_keeps_fields_another_manager_applies(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await apply(co, ns, "a", size=1, color="red")
    await apply(co, ns, "b", size=1, color="red")
    obj = await apply(co, ns, "a", size=1)
    assert obj["spec"]["color"] == "red"


async def test_apply_keeps_fields_written_by_other_means(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await apply(co, ns, "a", size=1)
    await patch_w1(co, ns, {"spec": {"color": "blue"}}, _content_type=MERGE)
    obj = await apply(co, ns, "a", size=3)
    assert obj["spec"]["color"] == "blue"
