"""`kubectl drain`, `cordon` and `uncordon` (v1.32) against a two-node emulator: the node is
cordoned, idle pods are evicted and replaced on the other node, a pod whose budget allows no
disruption makes drain retry on 429 until it goes by other means, then the drain completes."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import MERGE, wait_for

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
Obj = dict[str, Any]
NS = "apps"
PODS = ("", "pods")
NODES = ("", "nodes")
HUGE = 2147483647


@dataclass
class Cluster:
    kube: KubeEmulator
    kubeconfig: Path
    cache: Path

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        assert KUBECTL is not None
        return await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache),
            "--request-timeout=20s",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.cache.parent)},
        )

    async def ok(self, *args: str) -> str:
        proc = await self.start(*args)
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return out.decode()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with KubeEmulator(tls=True, nodes=2) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        yield Cluster(kube, tmp_path / "kubeconfig", tmp_path / "cache")


def deployment(name: str, replicas: int, labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                        }
                    ],
                    "volumes": [{"name": "work", "emptyDir": {}}],
                },
            },
        },
    }


def live(kube: KubeEmulator, app: str) -> list[Obj]:
    return [
        p
        for p in kube.store.items(PODS, NS)
        if p["metadata"]["labels"].get("app") == app
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("podIP")
    ]


async def test_drain_evicts_idle_pods_and_waits_for_a_protected_one(cluster: Cluster) -> None:
    kube = cluster.kube
    kube.apply(deployment("web", 4, {"app": "web"}))
    kube.apply(deployment("runner", 1, {"app": "runner", "busy": "true"}))
    kube.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "busy", "namespace": NS},
            "spec": {"minAvailable": HUGE, "selector": {"matchLabels": {"busy": "true"}}},
        }
    )
    await wait_for(lambda: len(live(kube, "web")) == 4 and live(kube, "runner"))
    busy = live(kube, "runner")[0]
    node = busy["spec"]["nodeName"]
    other = next(n for n in ("sandbox-node", "sandbox-node-2") if n != node)
    before = {p["metadata"]["name"] for p in live(kube, "web")}
    idle = {p["metadata"]["name"] for p in live(kube, "web") if p["spec"]["nodeName"] == node}
    assert idle, "the spread put no idle pod on the busy pod's node"

    await wait_for(
        lambda: (
            (kube.store.get(("policy", "poddisruptionbudgets"), NS, "busy") or {})
            .get("status", {})
            .get("observedGeneration")
        )
    )
    pdbs = (await cluster.ok("get", "pdb", "-n", NS)).splitlines()
    assert pdbs[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert pdbs[1].split()[:4] == ["busy", str(HUGE), "N/A", "0"]

    drain = await cluster.start(
        "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )
    await wait_for(
        lambda: kube.requests.count(
            verb="create", resource="pods", subresource="eviction", code=429
        )
    )
    assert (kube.store.get(NODES, "", node) or {})["spec"]["unschedulable"] is True
    await wait_for(
        lambda: (
            not idle & {p["metadata"]["name"] for p in kube.store.items(PODS, NS)}
            and len(live(kube, "web")) == 4
        )
    )
    replacements = [p for p in live(kube, "web") if p["metadata"]["name"] not in before]
    assert len(replacements) == len(idle)
    assert {p["spec"]["nodeName"] for p in replacements} == {other}
    assert kube.store.get(PODS, NS, busy["metadata"]["name"]) is not None
    assert drain.returncode is None

    rt = kube.catalog.preferred("apps", "deployments")
    assert rt is not None
    kube.registry.patch(
        rt, ns=NS, name="runner", content_type=MERGE, body={"spec": {"replicas": 0}}
    )
    async with asyncio.timeout(30):
        out, err = await drain.communicate()
    assert drain.returncode == 0, err.decode()
    assert f"node/{node} cordoned" in out.decode()
    assert f"node/{node} drained" in out.decode()
    assert (
        f'error when evicting pods/"{busy["metadata"]["name"]}" -n "{NS}" (will retry after 5s): '
        "Cannot evict pod as it would violate the pod's disruption budget." in err.decode()
    )
    assert not [p for p in kube.store.items(PODS, NS) if p["spec"].get("nodeName") == node]
    listed = [r.path for r in kube.requests.log if r.verb == "list" and r.resource == "pods"]
    assert any(f"fieldSelector=spec.nodeName%3D{node}" in path for path in listed)

    table = await cluster.ok("get", "nodes")
    assert any(
        line.startswith(node) and "SchedulingDisabled" in line for line in table.splitlines()
    )
    await cluster.ok("uncordon", node)
    assert not (kube.store.get(NODES, "", node) or {})["spec"].get("unschedulable")
