"""A booted emulator holds what a fresh 1.32 cluster holds: Running kube-system pods with their
usual labels, Ready nodes whose labels match their nodeInfo, ServiceAccount `default` and
ConfigMap `kube-root-ca.crt` in every namespace, and the bootstrap RBAC policy with its real
rules (docs/sandbox-kube.md#what-a-booted-emulator-contains)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import wait_for
from tests.sandbox.kube.test_kubectl import KUBECTL, Kubectl

SYSTEM = "kube-system"


@pytest.mark.parametrize(
    ("selector", "count"),
    [
        ("component=kube-apiserver", 1),
        ("component=etcd", 1),
        ("component=kube-scheduler", 1),
        ("component=kube-controller-manager", 1),
        ("tier=control-plane", 4),
        ("k8s-app=kube-dns", 2),
        ("k8s-app=kube-proxy", 1),
    ],
)
async def test_kube_system_pods_run_with_their_usual_labels(
    core: client.CoreV1Api, selector: str, count: int
) -> None:
    pods = (await core.list_namespaced_pod(SYSTEM, label_selector=selector)).items
    assert len(pods) == count
    for pod in pods:
        assert pod.status.phase == "Running"
        ready = {c.type: c.status for c in pod.status.conditions}
        assert ready["Ready"] == "True"
        assert all(s.ready and s.state.running for s in pod.status.container_statuses)
        node = await core.read_node(pod.spec.node_name)
        assert node.metadata.name == pod.spec.node_name


async def test_system_pods_are_scheduled_on_the_tainted_control_plane(
    core: client.CoreV1Api,
) -> None:
    pods = (await core.list_namespaced_pod(SYSTEM)).items
    nodes = {pod.spec.node_name for pod in pods}
    assert nodes == {"sandbox-control-plane"}
    node = await core.read_node("sandbox-control-plane")
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        ("node-role.kubernetes.io/control-plane", "NoSchedule")
    ]
    assert "node-role.kubernetes.io/control-plane" in node.metadata.labels


async def test_nodes_are_ready_and_labelled_as_their_node_info(core: client.CoreV1Api) -> None:
    nodes = (await core.list_node()).items
    assert len(nodes) >= 1
    for node in nodes:
        labels, info = node.metadata.labels, node.status.node_info
        assert labels["kubernetes.io/os"] == info.operating_system
        assert labels["kubernetes.io/arch"] == info.architecture
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        ready = [c for c in node.status.conditions if c.type == "Ready"]
        assert ready[0].status == "True"


async def test_every_namespace_has_its_service_account_and_root_ca(
    kube: KubeEmulator, core: client.CoreV1Api
) -> None:
    await core.create_namespace({"metadata": {"name": "fresh"}})
    await wait_for(lambda: kube.store.get(("", "configmaps"), "fresh", "kube-root-ca.crt"))
    for ns in ("default", SYSTEM, "kube-public", "kube-node-lease", "fresh"):
        sa = await core.read_namespaced_service_account("default", ns)
        cm = await core.read_namespaced_config_map("kube-root-ca.crt", ns)
        assert sa.metadata.namespace == ns
        assert "ca.crt" in cm.data


async def test_the_kubernetes_and_kube_dns_services_exist(core: client.CoreV1Api) -> None:
    api = await core.read_namespaced_service("kubernetes", "default")
    dns = await core.read_namespaced_service("kube-dns", SYSTEM)
    assert api.spec.cluster_ip == "10.96.0.1"
    assert [(p.name, p.port) for p in api.spec.ports] == [("https", 443)]
    assert dns.spec.cluster_ip == "10.96.0.10"
    assert dns.spec.selector == {"k8s-app": "kube-dns"}


async def test_a_deleted_system_pod_goes_away(kube: KubeEmulator, core: client.CoreV1Api) -> None:
    pods = (await core.list_namespaced_pod(SYSTEM, label_selector="k8s-app=kube-dns")).items
    name = pods[0].metadata.name
    await core.delete_namespaced_pod(name, SYSTEM)
    await wait_for(lambda: kube.store.get(("", "pods"), SYSTEM, name) is None)


BOOTSTRAP_ROLES = {
    "cluster-admin",
    "admin",
    "edit",
    "view",
    "system:auth-delegator",
    "system:basic-user",
    "system:discovery",
    "system:public-info-viewer",
    "system:monitoring",
    "system:node",
    "system:node-proxier",
    "system:kube-scheduler",
    "system:kube-controller-manager",
    "system:aggregate-to-view",
}


async def test_the_bootstrap_cluster_roles_and_bindings_exist(kube_api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(kube_api)
    roles = {r.metadata.name: r for r in (await rbac.list_cluster_role()).items}
    assert set(roles) >= BOOTSTRAP_ROLES
    assert roles["view"].aggregation_rule.cluster_role_selectors[0].match_labels == {
        "rbac.authorization.k8s.io/aggregate-to-view": "true"
    }
    bindings = {b.metadata.name: b for b in (await rbac.list_cluster_role_binding()).items}
    public = bindings["system:public-info-viewer"]
    assert {s.name for s in public.subjects} == {"system:authenticated", "system:unauthenticated"}
    assert bindings["system:basic-user"].subjects[0].name == "system:authenticated"


async def review(
    api: client.AuthorizationV1Api, user: str, groups: list[str], **attrs: str
) -> bool:
    key = "nonResourceAttributes" if "path" in attrs else "resourceAttributes"
    body = {"spec": {"user": user, "groups": groups, key: attrs}}
    result = await api.create_subject_access_review(body)
    return bool(result.status.allowed)


@pytest.mark.parametrize(
    ("role", "attrs", "allowed"),
    [
        ("view", {"verb": "list", "resource": "pods"}, True),
        ("view", {"verb": "get", "resource": "secrets"}, False),
        ("view", {"verb": "create", "resource": "pods"}, False),
        ("edit", {"verb": "get", "resource": "secrets"}, True),
        ("edit", {"verb": "create", "group": "apps", "resource": "deployments"}, True),
        (
            "edit",
            {"verb": "create", "group": "rbac.authorization.k8s.io", "resource": "roles"},
            False,
        ),
        (
            "admin",
            {"verb": "create", "group": "rbac.authorization.k8s.io", "resource": "roles"},
            True,
        ),
        ("admin", {"verb": "delete", "resource": "namespaces"}, False),
    ],
)
async def test_admin_edit_and_view_grant_their_real_rules(
    kube_api: client.ApiClient, role: str, attrs: dict[str, str], allowed: bool
) -> None:
    rbac = client.RbacAuthorizationV1Api(kube_api)
    await rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": f"alice-{role}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    authz = client.AuthorizationV1Api(kube_api)
    groups = ["system:authenticated"]
    assert await review(authz, "alice", groups, namespace="default", **attrs) is allowed


@pytest.mark.parametrize(
    ("attrs", "allowed"),
    [
        (
            {
                "verb": "create",
                "group": "authorization.k8s.io",
                "resource": "selfsubjectaccessreviews",
            },
            True,
        ),
        (
            {
                "verb": "create",
                "group": "authorization.k8s.io",
                "resource": "selfsubjectrulesreviews",
            },
            True,
        ),
        (
            {"verb": "create", "group": "authorization.k8s.io", "resource": "subjectaccessreviews"},
            False,
        ),
        ({"verb": "get", "path": "/version"}, True),
        ({"verb": "get", "path": "/healthz"}, True),
        ({"verb": "get", "path": "/metrics"}, False),
        ({"verb": "get", "path": "/.well-known/openid-configuration"}, False),
    ],
)
async def test_every_authenticated_user_gets_the_basic_roles(
    kube_api: client.ApiClient, attrs: dict[str, str], allowed: bool
) -> None:
    authz = client.AuthorizationV1Api(kube_api)
    assert await review(authz, "bob", ["system:authenticated"], **attrs) is allowed


async def test_the_auth_delegator_role_grants_reviews(kube_api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(kube_api)
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "webhook-auth"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:auth-delegator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "webhook", "namespace": "default"}],
        }
    )
    authz = client.AuthorizationV1Api(kube_api)
    user = "system:serviceaccount:default:webhook"
    groups = ["system:serviceaccounts", "system:authenticated"]
    for group, resource in (
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ):
        assert await review(authz, user, groups, verb="create", group=group, resource=resource)
    assert await review(authz, user, groups, verb="get", path="/.well-known/openid-configuration")


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with KubeEmulator(tls=True) as kube:
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        yield Kubectl(kube, tmp_path / "kubeconfig", tmp_path / "cache")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_shows_the_booted_cluster(kubectl: Kubectl) -> None:
    rows = [line.split() for line in (await kubectl.ok("get", "pods", "-n", SYSTEM)).splitlines()]
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert len(rows) == 8
    assert all(row[1:3] == ["1/1", "Running"] for row in rows[1:])
    names = [row[0] for row in rows[1:]]
    assert "kube-apiserver-sandbox-control-plane" in names
    assert sum(name.startswith("coredns-") for name in names) == 2
    dns = await kubectl.ok("get", "pods", "-A", "-l", "k8s-app=kube-dns", "-o", "name")
    assert len(dns.split()) == 2
    roles = await kubectl.ok("get", "clusterroles", "-o", "name")
    for name in ("cluster-admin", "admin", "edit", "view", "system:basic-user"):
        assert f"clusterrole.rbac.authorization.k8s.io/{name}" in roles.split()
    nodes = [line.split() for line in (await kubectl.ok("get", "nodes")).splitlines()[1:]]
    assert [(n[0], n[1]) for n in nodes] == [
        ("sandbox-control-plane", "Ready"),
        ("sandbox-node", "Ready"),
    ]
