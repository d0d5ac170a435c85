"""OpenAPI v3: the index, the group-version documents with built-in and CRD schemas, and
`kubectl explain` reading them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import FIXTURES
from tests.sandbox.kube.test_kubectl import KUBECTL, Kubectl
from tests.sandbox.kube.test_kubectl import kubectl as kubectl

Obj = dict[str, Any]


async def get_json(api: client.ApiClient, path: str) -> Obj:
    path, _, query = path.partition("?")
    response = await api.call_api(
        path,
        "GET",
        query_params=[tuple(query.split("=", 1))] if query else [],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        response_types_map={200: "object"},
        _return_http_data_only=True,
    )
    assert isinstance(response, dict)
    return response


async def test_the_index_names_every_group_version_with_a_url(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    index = await get_json(kube_api, "/openapi/v3")
    assert {"api/v1", "apis/apps/v1", "apis/actions.github.com/v1alpha1"} <= index["paths"].keys()
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    doc = await get_json(kube_api, url)
    deployment = doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "version": "v1", "kind": "Deployment"}
    ]
    spec = doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentSpec"]
    assert "selector" in spec["required"]
    assert spec["properties"]["replicas"]["type"] == "integer"


async def test_core_schemas_carry_types_descriptions_and_merge_keys(
    kube_api: client.ApiClient,
) -> None:
    doc = await get_json(kube_api, "/openapi/v3/api/v1")
    schemas = doc["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["type"] == "array"
    assert containers["items"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    ]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert "List of containers belonging to the pod" in containers["description"]
    labels = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"]
    assert labels == {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": labels["description"],
    }


async def test_a_crd_joins_the_index_with_its_schema_when_created(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    assert "apis/test.example.com/v1" not in (await get_json(kube_api, "/openapi/v3"))["paths"]
    kube.apply_crds([FIXTURES / "widgets-crd.yaml"])
    assert "apis/test.example.com/v1" in (await get_json(kube_api, "/openapi/v3"))["paths"]
    doc = await get_json(kube_api, "/openapi/v3/apis/test.example.com/v1")
    widget = doc["components"]["schemas"]["com.example.test.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "test.example.com", "version": "v1", "kind": "Widget"}
    ]
    assert "spec" in widget["properties"]
    assert widget["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    ]


async def test_an_unknown_group_version_is_404(kube_api: client.ApiClient) -> None:
    with pytest.raises(client.ApiException) as missing:
        await get_json(kube_api, "/openapi/v3/apis/nothing.example.com/v1")
    assert missing.value.status == 404


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_explain_reads_builtin_and_crd_schemas(kubectl: Kubectl) -> None:
    pod_spec = await kubectl.ok("explain", "pod.spec")
    assert "FIELD: spec <PodSpec>" in pod_spec
    assert "containers\t<[]Container> -required-" in pod_spec
    assert "List of containers belonging to the pod." in pod_spec
    status = await kubectl.ok("explain", "ephemeralrunner.status")
    assert "KIND:       EphemeralRunner" in status
    assert "phase\t<string>" in status
    assert "jobRepositoryName\t<string>" in status
    assert "containerPort\t<integer> -required-" in await kubectl.ok(
        "explain", "deployment.spec.template.spec.containers.ports"
    )
