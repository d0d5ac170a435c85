"""Custom resources validated against openAPIV3Schema: 422 naming the field, pruning, defaults."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import GROUP, MERGE, TIMEOUT, VERSION, WIDGETS, status_of, widget

pytestmark = pytest.mark.usefixtures("widgets")


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"size": "big"}, "spec.size", "FieldValueTypeInvalid"),
        ({}, "spec.size", "FieldValueRequired"),
        ({"size": -1}, "spec.size", "FieldValueInvalid"),
        ({"size": 1, "color": "pink"}, "spec.color", "FieldValueNotSupported"),
        ({"size": 1, "tags": [1]}, "spec.tags[0]", "FieldValueTypeInvalid"),
        ({"size": 1, "labels": {"a": 2}}, "spec.labels.a", "FieldValueTypeInvalid"),
    ],
)
async def test_invalid_custom_resource_is_422_naming_the_field(
    co: client.CustomObjectsApi, ns: str, spec: dict[str, Any], field: str, reason: str
) -> None:
    body = {**widget("w1"), "spec": spec}
    with pytest.raises(client.ApiException) as exc:
        await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    assert exc.value.status == 422
    status = status_of(exc.value)
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "Widget"
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [(field, reason)]
    assert status["message"].startswith(f'Widget.test.example.com "w1" is invalid: {field}: ')


async def test_invalid_patch_is_rejected_and_not_stored(
    co: client.CustomObjectsApi, ns: str
) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, "w1", {"spec": {"size": "x"}}, _content_type=MERGE
        )
    assert exc.value.status == 422
    obj = await co.get_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, "w1")
    assert obj["spec"]["size"] == 1


async def test_invalid_status_write_is_422(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    with pytest.raises(client.ApiException) as exc:
        await co.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, WIDGETS, "w1", {"status": {"count": "many"}}, _content_type=MERGE
        )
    assert status_of(exc.value)["details"]["causes"][0]["field"] == "status.count"


async def test_unknown_fields_are_pruned(co: client.CustomObjectsApi, ns: str) -> None:
    body = widget("w1", bogus=True)
    body["unknownTop"] = 1
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    assert "bogus" not in obj["spec"]
    assert "unknownTop" not in obj


async def test_misspelled_status_field_is_pruned(co: client.CustomObjectsApi, ns: str) -> None:
    await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    obj = await co.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, WIDGETS, "w1", {"status": {"phse": "Ready"}}, _content_type=MERGE
    )
    assert obj.get("status", {}) == {}


async def test_preserve_unknown_fields_keeps_them(co: client.CustomObjectsApi, ns: str) -> None:
    obj = await co.create_namespaced_custom_object(
        GROUP, VERSION, ns, WIDGETS, widget("w1", extra={"any": {"thing": [1]}})
    )
    assert obj["spec"]["extra"] == {"any": {"thing": [1]}}


async def test_defaults_are_applied(co: client.CustomObjectsApi, ns: str) -> None:
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, widget("w1"))
    assert obj["spec"]["mode"] == "fast"


async def test_metadata_is_never_pruned(co: client.CustomObjectsApi, ns: str) -> None:
    body = widget("w1")
    body["metadata"]["labels"] = {"a": "b"}
    body["metadata"]["annotations"] = {"c": "d"}
    obj = await co.create_namespaced_custom_object(GROUP, VERSION, ns, WIDGETS, body)
    assert obj["metadata"]["labels"] == {"a": "b"}
    assert obj["metadata"]["annotations"] == {"c": "d"}


async def test_crd_with_mismatched_name_is_422(kube_api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    crd = {
        "metadata": {"name": "wrong.test.example.com"},
        "spec": {
            "group": "test.example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    with pytest.raises(client.ApiException) as exc:
        await ext.create_custom_resource_definition(crd)
    assert exc.value.status == 422
    assert status_of(exc.value)["details"]["causes"][0]["field"] == "metadata.name"


async def test_strict_field_validation_rejects_unknown_fields(
    co: client.CustomObjectsApi, ns: str
) -> None:
    with pytest.raises(client.ApiException) as exc:
        await co.create_namespaced_custom_object(
            GROUP, VERSION, ns, WIDGETS, widget("w1", bogus=True), field_validation="Strict"
        )
    assert exc.value.status == 400
    assert status_of(exc.value)["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
        'unknown field "spec.bogus"'
    )


async def test_default_field_validation_warns_about_unknown_fields(
    kube: KubeEmulator, ns: str
) -> None:
    url = f"{kube.url}/apis/{GROUP}/{VERSION}/namespaces/{ns}/{WIDGETS}"
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url,
            json=widget("w1", bogus=True),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        body = await resp.json()
    assert resp.status == 201
    assert resp.headers.getall("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
    assert "bogus" not in body["spec"]
