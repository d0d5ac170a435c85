"""Every built-in kind the emulator lists in discovery is served with all its verbs and
subresources, and the kinds without a controller here read back with the real server's defaults
(docs/sandbox-kube.md#built-in-kinds). Discovery lists exactly what is served."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.dynamic import DynamicClient

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import status_of
from tests.sandbox.kube.test_kubectl import KUBECTL, Kubectl

Obj = dict[str, Any]
CSR_REQUEST = base64.b64encode(b"-----BEGIN CERTIFICATE REQUEST-----\n").decode()
POD_TEMPLATE = {
    "metadata": {"labels": {"app": "a"}},
    "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
}

# (apiVersion, kind, namespaced, name, the rest of a valid body)
KINDS: list[tuple[str, str, bool, str, Obj]] = [
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        False,
        "csr1",
        {
            "spec": {
                "request": CSR_REQUEST,
                "signerName": "kubernetes.io/kube-apiserver-client",
                "usages": ["client auth"],
            }
        },
    ),
    (
        "v1",
        "ReplicationController",
        True,
        "rc1",
        {"spec": {"replicas": 0, "selector": {"app": "a"}, "template": POD_TEMPLATE}},
    ),
    ("v1", "PodTemplate", True, "pt1", {"template": POD_TEMPLATE}),
    ("storage.k8s.io/v1", "CSIStorageCapacity", True, "cap1", {"storageClassName": "standard"}),
    ("storage.k8s.io/v1", "StorageClass", False, "sc1", {"provisioner": "example.com/disk"}),
    (
        "networking.k8s.io/v1",
        "Ingress",
        True,
        "ing1",
        {"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}},
    ),
    ("networking.k8s.io/v1", "NetworkPolicy", True, "np1", {"spec": {"podSelector": {}}}),
    ("networking.k8s.io/v1", "IngressClass", False, "ic1", {"spec": {"controller": "x.io/c"}}),
    (
        "apiregistration.k8s.io/v1",
        "APIService",
        False,
        "v1.example.com",
        {
            "spec": {
                "group": "example.com",
                "version": "v1",
                "groupPriorityMinimum": 100,
                "versionPriority": 10,
                "service": {"name": "api", "namespace": "default"},
            }
        },
    ),
    ("apps/v1", "ControllerRevision", True, "cr1", {"revision": 1}),
    ("discovery.k8s.io/v1", "EndpointSlice", True, "es1", {"addressType": "IPv4", "endpoints": []}),
    ("node.k8s.io/v1", "RuntimeClass", False, "rc1", {"handler": "runc"}),
    ("autoscaling/v2", "HorizontalPodAutoscaler", True, "hpa1", {"spec": {"maxReplicas": 2}}),
]


@pytest.fixture
async def dynamic(kube_api: client.ApiClient, tmp_path: Path) -> DynamicClient:
    return await DynamicClient(kube_api, cache_file=str(tmp_path / "discovery.json"))


@pytest.fixture
async def http(kube: KubeEmulator) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with aiohttp.ClientSession(base_url=kube.url, headers=headers) as session:
        yield session


def body_of(api_version: str, kind: str, name: str, rest: Obj, **labels: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "labels": labels},
        **json.loads(json.dumps(rest)),
    }


@pytest.mark.parametrize(
    ("api_version", "kind", "namespaced", "name", "rest"), KINDS, ids=[k[1] for k in KINDS]
)
async def test_every_verb_is_served(
    dynamic: DynamicClient,
    http: aiohttp.ClientSession,
    api_version: str,
    kind: str,
    namespaced: bool,
    name: str,
    rest: Obj,
) -> None:
    res = await dynamic.resources.get(api_version=api_version, kind=kind)
    ns = "default" if namespaced else None
    created = await dynamic.create(
        res, body=body_of(api_version, kind, name, rest, t="1"), namespace=ns
    )
    assert created.metadata.name == name
    got = await dynamic.get(res, name=name, namespace=ns)
    assert got.metadata.uid == created.metadata.uid
    listed = await dynamic.get(res, namespace=ns, label_selector="t=1")
    assert [i.metadata.name for i in listed.items] == [name]
    prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/default/{res.name}" if namespaced else f"{prefix}/{res.name}"
    async with http.get(path, params={"watch": "1", "labelSelector": "t=1"}) as watch:
        event = json.loads(await watch.content.readline())
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", name)
    patched = await dynamic.patch(
        res,
        body={"metadata": {"labels": {"p": "1"}}},
        name=name,
        namespace=ns,
        content_type="application/merge-patch+json",
    )
    assert patched.metadata.labels["p"] == "1"
    current = (await dynamic.get(res, name=name, namespace=ns)).to_dict()
    current["metadata"]["annotations"] = {"replaced": "yes"}
    replaced = await dynamic.replace(res, body=current, namespace=ns)
    assert replaced.metadata.annotations["replaced"] == "yes"
    await dynamic.delete(res, name=name, namespace=ns)
    for other in ("x1", "x2"):
        await dynamic.create(
            res,
            body=body_of(
                api_version, kind, f"{other}.{name}" if kind == "APIService" else other, rest, t="2"
            ),
            namespace=ns,
        )
    await dynamic.delete(res, namespace=ns, label_selector="t=2")
    assert (await dynamic.get(res, namespace=ns, label_selector="t")).items == []


async def test_discovery_lists_exactly_what_is_served(
    kube_api: client.ApiClient, http: aiohttp.ClientSession
) -> None:
    """Both discovery forms name the same resources, and each of them (and each subresource)
    answers: a missing object's subresource is a NotFound that names the object, never the
    unknown-path answer."""
    aggregated_accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    served: set[tuple[str, str, str]] = set()
    for root in ("/api", "/apis"):
        async with http.get(root, headers={"Accept": aggregated_accept}) as reply:
            doc = await reply.json()
        for group in doc["items"]:
            for version in group["versions"]:
                for res in version["resources"]:
                    gv = f"{group['metadata']['name']}/{version['version']}".lstrip("/")
                    served.add((gv, res["resource"], res["scope"]))
                    for sub in res.get("subresources") or []:
                        served.add(
                            (gv, f"{res['resource']}/{sub['subresource']}", ",".join(sub["verbs"]))
                        )
    legacy: set[tuple[str, str]] = set()
    apis = client.ApisApi(kube_api)
    group_versions = ["v1"] + [
        v.group_version for g in (await apis.get_api_versions()).groups for v in g.versions
    ]
    for gv in group_versions:
        prefix = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        async with http.get(prefix) as reply:
            for res in (await reply.json())["resources"]:
                legacy.add((gv, res["name"]))
    assert legacy == {(gv, name) for gv, name, _ in served}
    for gv, name, extra in sorted(served):
        prefix = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        plural, _, sub = name.partition("/")
        if not sub:
            where = "/namespaces/default" if extra == "Namespaced" else ""
            async with http.get(f"{prefix}{where}/{plural}") as reply:
                assert reply.status in (200, 405), (gv, name, reply.status)
            continue
        namespaced = (gv, plural, "Namespaced") in served
        where = "/namespaces/default" if namespaced else ""
        url = f"{prefix}{where}/{plural}/absent/{sub}"
        verbs = extra.split(",")
        method = "GET" if "get" in verbs else ("PUT" if "update" in verbs else "POST")
        async with http.request(method, url, json={"metadata": {"name": "absent"}}) as reply:
            answer = await reply.json()
        assert reply.status == 404, (gv, name, answer)
        assert answer["details"].get("name") == "absent", (gv, name, answer)


async def test_a_csr_is_approved_and_issued_through_its_subresources(
    kube_api: client.ApiClient,
) -> None:
    certs = client.CertificatesV1Api(kube_api)
    body = body_of("certificates.k8s.io/v1", "CertificateSigningRequest", "alice", KINDS[0][4])
    created = await certs.create_certificate_signing_request(body)
    assert created.spec.username == "kubernetes-admin"
    assert created.status.conditions is None
    created.status.conditions = [
        client.V1CertificateSigningRequestCondition(
            type="Approved", status="True", reason="Test", message="ok"
        )
    ]
    created.spec.signer_name = "changed.example.com/ignored"
    approved = await certs.replace_certificate_signing_request_approval("alice", created)
    assert [c.type for c in approved.status.conditions] == ["Approved"]
    assert approved.spec.signer_name == "kubernetes.io/kube-apiserver-client"
    approved.status.certificate = base64.b64encode(b"cert").decode()
    issued = await certs.replace_certificate_signing_request_status("alice", approved)
    assert issued.status.certificate == approved.status.certificate
    read = await certs.read_certificate_signing_request_approval("alice")
    assert read.status.certificate == approved.status.certificate
    denied = [
        {"type": "Approved", "status": "True"},
        {"type": "Denied", "status": "True"},
    ]
    with pytest.raises(client.ApiException) as err:
        await certs.patch_certificate_signing_request_approval(
            "alice", {"status": {"conditions": denied}}
        )
    assert err.value.status == 422
    assert "mutually exclusive" in status_of(err.value)["message"]


async def test_a_csr_needs_its_request_signer_and_usages(kube_api: client.ApiClient) -> None:
    certs = client.CertificatesV1Api(kube_api)
    with pytest.raises(client.ApiException) as err:
        await certs.create_certificate_signing_request({"metadata": {"name": "x"}, "spec": {}})
    causes = {c["field"] for c in status_of(err.value)["details"]["causes"]}
    assert causes == {"spec.request", "spec.signerName", "spec.usages"}


async def test_a_replication_controller_is_defaulted_and_scaled(
    kube_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api)
    rc = await core.create_namespaced_replication_controller(
        "default", {"metadata": {"name": "web"}, "spec": {"template": POD_TEMPLATE}}
    )
    assert rc.spec.replicas == 1
    assert rc.spec.selector == {"app": "a"}
    assert rc.metadata.labels == {"app": "a"}
    assert rc.spec.template.spec.dns_policy == "ClusterFirst"
    assert rc.status.replicas == 0
    scale = await core.read_namespaced_replication_controller_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=a")
    scaled = await core.patch_namespaced_replication_controller_scale(
        "web", "default", {"spec": {"replicas": 4}}
    )
    assert scaled.spec.replicas == 4
    assert (await core.read_namespaced_replication_controller("web", "default")).spec.replicas == 4
    with pytest.raises(client.ApiException) as err:
        await core.patch_namespaced_replication_controller_scale(
            "web", "default", {"spec": {"replicas": -1}}
        )
    assert err.value.status == 422
    status = await core.patch_namespaced_replication_controller_status(
        "web", "default", {"status": {"replicas": 4, "readyReplicas": 4}}
    )
    assert (status.status.ready_replicas, status.spec.replicas) == (4, 4)


async def test_a_replication_controller_template_is_validated(kube_api: client.ApiClient) -> None:
    core = client.CoreV1Api(kube_api)
    template = {"metadata": {"labels": {"app": "b"}}, "spec": {"containers": [{"image": "x:1"}]}}
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_replication_controller(
            "default",
            {"metadata": {"name": "bad"}, "spec": {"selector": {"app": "a"}, "template": template}},
        )
    fields = {c["field"] for c in status_of(err.value)["details"]["causes"]}
    assert fields == {"spec.template.metadata.labels", "spec.template.spec.containers[0].name"}


async def test_an_ingress_reads_back_an_empty_load_balancer_status(
    kube_api: client.ApiClient,
) -> None:
    net = client.NetworkingV1Api(kube_api)
    body = body_of("networking.k8s.io/v1", "Ingress", "web", KINDS[5][4])
    created = await net.create_namespaced_ingress("default", body)
    assert created.status.load_balancer.to_dict() == {"ingress": None}
    lb = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    updated = await net.patch_namespaced_ingress_status("web", "default", lb)
    assert updated.status.load_balancer.ingress[0].ip == "192.0.2.1"
    with pytest.raises(client.ApiException) as err:
        await net.create_namespaced_ingress(
            "default",
            {
                "metadata": {"name": "nopath"},
                "spec": {
                    "rules": [
                        {
                            "http": {
                                "paths": [
                                    {
                                        "path": "/",
                                        "backend": {
                                            "service": {"name": "s", "port": {"number": 80}}
                                        },
                                    }
                                ]
                            }
                        }
                    ]
                },
            },
        )
    assert status_of(err.value)["details"]["causes"][0]["field"] == (
        "spec.rules[0].http.paths[0].pathType"
    )


async def test_a_network_policy_gets_its_policy_types(kube_api: client.ApiClient) -> None:
    net = client.NetworkingV1Api(kube_api)
    ingress_only = await net.create_namespaced_network_policy(
        "default", {"metadata": {"name": "a"}, "spec": {"podSelector": {}}}
    )
    both = await net.create_namespaced_network_policy(
        "default",
        {"metadata": {"name": "b"}, "spec": {"egress": [{"ports": [{"port": 53}]}]}},
    )
    assert ingress_only.spec.policy_types == ["Ingress"]
    assert both.spec.policy_types == ["Ingress", "Egress"]
    assert both.spec.egress[0].ports[0].protocol == "TCP"


async def test_an_apiservice_reports_its_availability(kube_api: client.ApiClient) -> None:
    reg = client.ApiregistrationV1Api(kube_api)
    remote = await reg.create_api_service(
        body_of("apiregistration.k8s.io/v1", "APIService", "v1.example.com", KINDS[8][4])
    )
    local = await reg.create_api_service(
        {
            "metadata": {"name": "v1.local.example.com"},
            "spec": {
                "group": "local.example.com",
                "version": "v1",
                "groupPriorityMinimum": 1,
                "versionPriority": 1,
            },
        }
    )
    assert [(c.type, c.status, c.reason) for c in remote.status.conditions] == [
        ("Available", "False", "ServiceNotFound")
    ]
    assert [(c.type, c.status) for c in local.status.conditions] == [("Available", "True")]
    with pytest.raises(client.ApiException) as err:
        await reg.create_api_service(
            {"metadata": {"name": "wrong"}, "spec": {"group": "g.io", "version": "v1"}}
        )
    assert status_of(err.value)["details"]["causes"][0]["field"] == "metadata.name"


async def test_a_storage_capacity_needs_its_class(kube_api: client.ApiClient) -> None:
    storage = client.StorageV1Api(kube_api)
    with pytest.raises(client.ApiException) as err:
        await storage.create_namespaced_csi_storage_capacity("default", {"metadata": {"name": "c"}})
    assert status_of(err.value)["details"]["causes"][0]["field"] == "storageClassName"


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with KubeEmulator(tls=True) as kube:
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        yield Kubectl(kube, tmp_path / "kubeconfig", tmp_path / "cache")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_approves_a_csr_and_scales_a_replication_controller(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "objects.json"
    csr = body_of("certificates.k8s.io/v1", "CertificateSigningRequest", "alice", KINDS[0][4])
    rc = body_of("v1", "ReplicationController", "web", {"spec": {"template": POD_TEMPLATE}})
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [csr, rc]}))
    await kubectl.ok("apply", "-f", str(manifest), "-n", "default")
    rows = [line.split() for line in (await kubectl.ok("get", "csr")).splitlines()]
    assert rows[0][:5] == ["NAME", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert rows[1][0] == "alice"
    assert rows[1][4] == "Pending"
    await kubectl.ok("certificate", "approve", "alice")
    rows = [line.split() for line in (await kubectl.ok("get", "csr", "alice")).splitlines()]
    assert rows[1][4] == "Approved"
    await kubectl.ok("scale", "rc", "web", "--replicas=3", "-n", "default")
    replicas = await kubectl.ok(
        "get", "rc", "web", "-n", "default", "-o", "jsonpath={.spec.replicas}"
    )
    assert replicas == "3"
