"""The defaults and validation a real server applies to Services and Pods, and what DELETE
answers for each kind (docs/sandbox-kube.md#services, #pods, #deletion-and-garbage-collection)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import status_of, wait_for

Obj = dict[str, Any]
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")


def service(name: str, **spec: Any) -> Obj:
    spec.setdefault("ports", [{"port": 80}])
    return {"metadata": {"name": name}, "spec": {"selector": {"app": name}, **spec}}


async def test_a_service_reads_back_the_real_defaults(core: client.CoreV1Api, ns: str) -> None:
    created = await core.create_namespaced_service(ns, service("web"))
    raw = core.api_client.sanitize_for_serialization(created)
    spec = raw["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert ipaddress.ip_address(spec["clusterIP"]) in SERVICE_CIDR
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert raw["status"] == {"loadBalancer": {}}


async def test_cluster_ips_are_unique_and_kept_on_update(core: client.CoreV1Api, ns: str) -> None:
    first = await core.create_namespaced_service(ns, service("a"))
    second = await core.create_namespaced_service(ns, service("b"))
    assert first.spec.cluster_ip != second.spec.cluster_ip
    replaced = await core.replace_namespaced_service(
        "a",
        ns,
        {
            "metadata": {"name": "a", "resourceVersion": first.metadata.resource_version},
            "spec": {"selector": {"app": "other"}, "ports": [{"port": 81}]},
        },
    )
    assert replaced.spec.cluster_ip == first.spec.cluster_ip
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_service(ns, service("c", clusterIP=first.spec.cluster_ip))
    assert err.value.status == 422
    cause = status_of(err.value)["details"]["causes"][0]
    assert cause["field"] == "spec.clusterIPs"
    assert "provided IP is already allocated" in cause["message"]
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_service(ns, service("d", clusterIP="192.168.0.1"))
    assert "not in the valid range" in status_of(err.value)["message"]


async def test_a_node_port_service_gets_its_ports(core: client.CoreV1Api, ns: str) -> None:
    created = await core.create_namespaced_service(
        ns,
        service("np", type="NodePort", ports=[{"name": "http", "port": 80, "targetPort": "web"}]),
    )
    port = created.spec.ports[0]
    assert 30000 <= port.node_port <= 32767
    assert port.target_port == "web"
    assert created.spec.external_traffic_policy == "Cluster"
    headless = await core.create_namespaced_service(ns, service("hl", clusterIP="None", ports=[]))
    assert headless.spec.cluster_ips == ["None"]
    external = await core.create_namespaced_service(
        ns, {"metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "x.io"}}
    )
    assert external.spec.cluster_ip is None


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"ports": []}, "spec.ports", "spec.ports: Required value"),
        ({"ports": [{"port": 0}]}, "spec.ports[0].port", "must be between 1 and 65535"),
        (
            {"ports": [{"port": 80}, {"port": 81}]},
            "spec.ports[0].name",
            "spec.ports[0].name: Required value",
        ),
        ({"type": "Fancy"}, "spec.type", 'Unsupported value: "Fancy"'),
        ({"ports": [{"port": 80, "protocol": "ICMP"}]}, "spec.ports[0].protocol", "ICMP"),
        ({"ports": [{"port": 80, "nodePort": 30001}]}, "spec.ports[0].nodePort", "may not be used"),
        ({"ipFamilyPolicy": "RequireDualStack"}, "spec.ipFamilyPolicy", "dual-stack"),
    ],
)
async def test_an_invalid_service_is_rejected_with_the_field(
    core: client.CoreV1Api, ns: str, spec: Obj, field: str, message: str
) -> None:
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_service(ns, service("bad", **spec))
    assert err.value.status == 422
    status = status_of(err.value)
    assert field in [c["field"] for c in status["details"]["causes"]]
    assert message in status["message"]


async def test_a_pod_reads_back_the_real_defaults(core: client.CoreV1Api, ns: str) -> None:
    created = await core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": "a", "image": "busybox"},
                    {"name": "b", "image": "busybox:1.36", "ports": [{"containerPort": 80}]},
                ]
            },
        },
    )
    spec = core.api_client.sanitize_for_serialization(created)["spec"]
    assert spec["tolerations"] == [
        {
            "key": f"node.kubernetes.io/{key}",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
        for key in ("not-ready", "unreachable")
    ]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["enableServiceLinks"] is True
    assert spec["priority"] == 0
    assert spec["restartPolicy"] == "Always"
    assert spec["securityContext"] == {}
    a, b = spec["containers"]
    assert (a["imagePullPolicy"], b["imagePullPolicy"]) == ("Always", "IfNotPresent")
    assert a["terminationMessagePath"] == "/dev/termination-log"
    assert a["terminationMessagePolicy"] == "File"
    assert b["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


async def test_a_pod_keeps_its_own_not_ready_toleration(core: client.CoreV1Api, ns: str) -> None:
    own = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    created = await core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "p"},
            "spec": {"tolerations": [own], "containers": [{"name": "a", "image": "x:1"}]},
        },
    )
    keys = [(t.key, t.toleration_seconds) for t in created.spec.tolerations]
    assert keys == [("node.kubernetes.io/not-ready", None), ("node.kubernetes.io/unreachable", 300)]


@pytest.mark.parametrize(
    ("containers", "message"),
    [
        ([{"image": "busybox:1"}], "spec.containers[0].name: Required value"),
        (
            [{"name": "a", "image": "x:1"}, {"name": "a", "image": "x:1"}],
            'spec.containers[1].name: Duplicate value: "a"',
        ),
        ([{"name": "a"}], "spec.containers[0].image: Required value"),
        ([{"name": "A_b", "image": "x:1"}], 'spec.containers[0].name: Invalid value: "A_b"'),
        ([], "spec.containers: Required value"),
        (
            [{"name": "a", "image": "x:1", "env": [{"value": "v"}]}],
            "spec.containers[0].env[0].name: Required value",
        ),
        (
            [{"name": "a", "image": "x:1", "env": [{"name": "V", "valueFrom": {}}]}],
            "spec.containers[0].env[0].valueFrom: Invalid value",
        ),
        (
            [{"name": "a", "image": "x:1", "envFrom": [{"prefix": "P_"}]}],
            "spec.containers[0].envFrom[0]: Invalid value",
        ),
        (
            [{"name": "a", "image": "x:1", "ports": [{"containerPort": 70000}]}],
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000",
        ),
    ],
)
async def test_an_invalid_pod_is_rejected_with_the_field_path(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str, containers: list[Obj], message: str
) -> None:
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_pod(
            ns, {"metadata": {"name": "p"}, "spec": {"containers": containers}}
        )
    assert err.value.status == 422
    assert message in status_of(err.value)["message"]
    assert kube.store.get(("", "pods"), ns, "p") is None


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": "busybox"},
        {"containers": [{"name": "a", "image": "x:1", "env": {"A": "1"}}]},
        {"containers": [{"name": "a", "image": "x:1", "ports": [{"containerPort": "80"}]}]},
        {"containers": [{"name": 3, "image": "x:1"}]},
    ],
)
async def test_a_pod_field_of_the_wrong_type_is_a_bad_request(
    core: client.CoreV1Api, ns: str, spec: Obj
) -> None:
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": spec})
    assert err.value.status == 400
    assert "cannot be handled as a Pod" in status_of(err.value)["message"]


@pytest.mark.parametrize(
    ("create", "delete", "kind"),
    [
        ("create_namespaced_service", "delete_namespaced_service", "Service"),
        (
            "create_namespaced_service_account",
            "delete_namespaced_service_account",
            "ServiceAccount",
        ),
        (
            "create_namespaced_persistent_volume_claim",
            "delete_namespaced_persistent_volume_claim",
            "PersistentVolumeClaim",
        ),
        ("create_namespaced_config_map", "delete_namespaced_config_map", "Status"),
        ("create_namespaced_secret", "delete_namespaced_secret", "Status"),
    ],
)
async def test_delete_answers_what_the_real_server_returns(
    core: client.CoreV1Api, ns: str, create: str, delete: str, kind: str
) -> None:
    body: Obj = {"metadata": {"name": "x"}}
    if kind == "Service":
        body["spec"] = {"ports": [{"port": 80}]}
    if kind == "PersistentVolumeClaim":
        body["spec"] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
    await getattr(core, create)(ns, body)
    answer = await getattr(core, delete)("x", ns, _preload_content=False)
    raw = await answer.json()
    assert raw["kind"] == kind
    if kind == "Status":
        assert raw["status"] == "Success"
        assert raw["details"]["name"] == "x"
    else:
        assert raw["metadata"]["name"] == "x"
        assert raw["metadata"]["namespace"] == ns


async def test_a_typed_client_reads_a_deleted_service(core: client.CoreV1Api, ns: str) -> None:
    await core.create_namespaced_service(ns, service("web"))
    deleted = await core.delete_namespaced_service("web", ns)
    assert isinstance(deleted, client.V1Service)
    assert (deleted.kind, deleted.metadata.name) == ("Service", "web")


async def test_a_held_object_answers_its_deletion_mark(
    kube: KubeEmulator, core: client.CoreV1Api, ns: str
) -> None:
    await core.create_namespaced_service(
        ns, {**service("held"), "metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    )
    marked = await core.delete_namespaced_service("held", ns)
    assert marked.metadata.deletion_timestamp is not None
    await core.patch_namespaced_service("held", ns, {"metadata": {"finalizers": None}})
    await wait_for(lambda: kube.store.get(("", "services"), ns, "held") is None)
