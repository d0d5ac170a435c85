"""The Deployment and ReplicaSet controllers: pods from the template, owner references, status
and conditions, rolling updates, scaling, and `kubectl rollout status` finishing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import TIMEOUT, wait_for
from tests.sandbox.kube.test_kubectl import KUBECTL, Kubectl
from tests.sandbox.kube.test_kubectl import kubectl as kubectl

Obj = dict[str, Any]


def deployment(name: str, *, replicas: int = 2, image: str = "busybox:1", **spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
            **spec,
        },
    }


def pods_of(kube: KubeEmulator, app: str) -> list[Obj]:
    return [
        p
        for p in kube.store.items(("", "pods"), "default")
        if p["metadata"].get("labels", {}).get("app") == app
    ]


async def until(check: Callable[[], Any]) -> Any:
    """Wait for a condition read through the store (the controllers run in this loop)."""
    return await wait_for(check)


async def test_a_deployment_gets_a_replicaset_and_ready_pods(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment("default", deployment("web", replicas=3))

    async def rolled_out() -> client.V1Deployment:
        async with asyncio.timeout(TIMEOUT):
            while True:
                d = await apps.read_namespaced_deployment("web", "default")
                if d.status.available_replicas == 3 and d.status.observed_generation == 1:
                    return d
                await asyncio.sleep(0.02)

    d = await rolled_out()
    assert (d.status.replicas, d.status.ready_replicas, d.status.updated_replicas) == (3, 3, 3)
    conditions = {c.type: (c.status, c.reason) for c in d.status.conditions}
    assert conditions == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    (rs,) = (await apps.list_namespaced_replica_set("default")).items
    digest = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{digest}"
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": digest}
    assert rs.metadata.owner_references[0].uid == d.metadata.uid
    assert rs.metadata.owner_references[0].controller is True
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert rs.status.ready_replicas == 3
    pods = (
        await client.CoreV1Api(kube_api).list_namespaced_pod("default", label_selector="app=web")
    ).items
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.name.startswith(f"web-{digest}-")
        assert pod.metadata.labels["pod-template-hash"] == digest
        assert pod.metadata.owner_references[0].uid == rs.metadata.uid
        assert pod.status.phase == "Running"


async def test_a_template_change_rolls_to_a_new_replicaset(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment("default", deployment("roll", replicas=4))
    await until(
        lambda: (
            len([p for p in pods_of(kube, "roll") if p["status"].get("phase") == "Running"]) == 4
        )
    )
    await apps.patch_namespaced_deployment(
        "roll",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}}}},
    )

    def done() -> bool:
        pods = pods_of(kube, "roll")
        return len(pods) == 4 and all(
            p["spec"]["containers"][0]["image"] == "busybox:2"
            and p["status"].get("phase") == "Running"
            for p in pods
        )

    await until(done)
    sets = {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs
        for rs in (await apps.list_namespaced_replica_set("default")).items
    }
    assert (sets["1"].spec.replicas, sets["2"].spec.replicas) == (0, 4)
    d = await apps.read_namespaced_deployment("roll", "default")
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    assert d.status.updated_replicas == 4


async def test_replicasets_replace_deleted_pods_and_follow_scale(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    apps = client.AppsV1Api(kube_api)
    core = client.CoreV1Api(kube_api)
    await apps.create_namespaced_deployment("default", deployment("keep", replicas=2))
    await until(lambda: len(pods_of(kube, "keep")) == 2)
    victim = pods_of(kube, "keep")[0]["metadata"]["name"]
    await core.delete_namespaced_pod(victim, "default")
    await until(
        lambda: (
            len(pods_of(kube, "keep")) == 2
            and victim not in {p["metadata"]["name"] for p in pods_of(kube, "keep")}
        )
    )
    await apps.patch_namespaced_deployment("keep", "default", {"spec": {"replicas": 1}})
    await until(lambda: len(pods_of(kube, "keep")) == 1)
    await until(
        lambda: (
            (kube.store.get(("apps", "deployments"), "default", "keep") or {})
            .get("status", {})
            .get("replicas")
            == 1
        )
    )


async def test_deleting_a_deployment_removes_its_replicasets_and_pods(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    apps = client.AppsV1Api(kube_api)
    await apps.create_namespaced_deployment("default", deployment("gone", replicas=2))
    await until(lambda: len(pods_of(kube, "gone")) == 2)
    await apps.delete_namespaced_deployment("gone", "default")
    await until(
        lambda: (
            not pods_of(kube, "gone")
            and not list(kube.store.items(("apps", "replicasets"), "default"))
        )
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_rollout_status_finishes(kubectl: Kubectl, tmp_path: Any) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(json.dumps(deployment("web", replicas=2)))
    await kubectl.ok("apply", "-f", str(manifest))
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=20s")
    assert 'deployment "web" successfully rolled out' in out
    await kubectl.ok("set", "image", "deployment/web", "main=busybox:2")
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=20s")
    assert 'deployment "web" successfully rolled out' in out
    history = await kubectl.ok("rollout", "history", "deployment/web")
    assert [line.split()[0] for line in history.splitlines()[2:] if line] == ["1", "2"]
    await kubectl.ok("scale", "deployment/web", "--replicas=3")
    out = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=20s")
    assert 'deployment "web" successfully rolled out' in out
    assert len(pods_of(kubectl.kube, "web")) == 3


async def test_a_deployment_the_controller_cannot_read_does_not_stop_the_others(
    kube: KubeEmulator, kube_api: client.ApiClient
) -> None:
    """Deployments are stored without full validation; one the controller fails on (an
    unparseable maxSurge) is logged and skipped."""
    odd = deployment("odd")
    odd["spec"]["replicas"] = None
    odd["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "lots"}}
    kube.apply(odd)
    await client.AppsV1Api(kube_api).create_namespaced_deployment("default", deployment("fine"))
    await until(lambda: len(pods_of(kube, "fine")) == 2)
