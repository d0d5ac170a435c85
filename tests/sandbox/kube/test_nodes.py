"""Several worker nodes: the scheduler step (spread, cordon, the real FitError message, binding
again on uncordon), the unschedulable taint, per-node addresses, and pod GC of a deleted node's
pods, through kubernetes-asyncio."""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.kubelet.scheduler import schedule
from sandbox.kube.store import Event
from tests.sandbox.kube.conftest import wait_for

Obj = dict[str, Any]
NS = "work"
WORKERS = ("sandbox-node", "sandbox-node-2", "sandbox-node-3")
NO_NODE = (
    "0/4 nodes are available: 1 node(s) had untolerated taint "
    "{node-role.kubernetes.io/control-plane: }, 3 node(s) were unschedulable. preemption: 0/4 "
    "nodes are available: 4 Preemption is not helpful for scheduling."
)


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[KubeEmulator, client.CoreV1Api]]:
    async with KubeEmulator(nodes=3) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        async with client.ApiClient(await kube.configuration()) as api:
            yield kube, client.CoreV1Api(api)


def pod(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def stored(kube: KubeEmulator, name: str) -> Obj | None:
    return kube.store.get(("", "pods"), NS, name)


def running(kube: KubeEmulator, name: str) -> Obj | None:
    obj = stored(kube, name)
    return obj if obj and (obj.get("status") or {}).get("podIP") else None


async def cordon(core: client.CoreV1Api, node: str, value: bool = True) -> None:
    await core.patch_node(node, {"spec": {"unschedulable": value}})


async def test_workers_are_ready_nodes_with_their_own_addresses(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    _, core = cluster
    nodes = {n.metadata.name: n for n in (await core.list_node()).items}
    assert set(WORKERS) <= set(nodes)
    ips, cidrs = set(), set()
    for name in WORKERS:
        node = nodes[name]
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True"
        assert node.metadata.labels["kubernetes.io/hostname"] == name
        ips.add(next(a.address for a in node.status.addresses if a.type == "InternalIP"))
        cidrs.add(node.spec.pod_cidr)
    assert len(ips) == len(cidrs) == 3
    assert nodes["sandbox-control-plane"].spec.pod_cidr not in cidrs


async def test_pods_spread_over_the_nodes_with_the_node_addresses(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    kube, core = cluster
    for i in range(6):
        await core.create_namespaced_pod(NS, pod(f"p{i}"))
    pods = [await wait_for(partial(running, kube, f"p{i}")) for i in range(6)]
    assert Counter(p["spec"]["nodeName"] for p in pods) == dict.fromkeys(WORKERS, 2)
    nodes = {n.metadata.name: n for n in (await core.list_node()).items}
    for p in pods:
        node = nodes[p["spec"]["nodeName"]]
        internal = next(a.address for a in node.status.addresses if a.type == "InternalIP")
        assert p["status"]["hostIP"] == internal
        assert ipaddress.ip_address(p["status"]["podIP"]) in ipaddress.ip_network(
            node.spec.pod_cidr
        )
    assert len({p["status"]["podIP"] for p in pods}) == 6


async def test_no_schedulable_node_keeps_the_pod_pending_until_uncordon(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    kube, core = cluster
    for node in WORKERS:
        await cordon(core, node)
    await core.create_namespaced_pod(NS, pod("waiting"))

    def unschedulable() -> Obj | None:
        obj = stored(kube, "waiting")
        conditions = (obj or {}).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    condition = await wait_for(unschedulable)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == NO_NODE
    read = await core.read_namespaced_pod("waiting", NS)
    assert read.status.phase == "Pending"
    assert read.spec.node_name is None

    await cordon(core, "sandbox-node-2", False)
    bound = await wait_for(lambda: running(kube, "waiting"))
    assert bound["spec"]["nodeName"] == "sandbox-node-2"
    scheduled = next(c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True"


async def test_a_cordoned_node_takes_no_new_pod_and_gets_the_unschedulable_taint(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    kube, core = cluster
    await cordon(core, "sandbox-node")

    def tainted() -> list[Obj]:
        node = kube.store.get(("", "nodes"), "", "sandbox-node") or {}
        return [t for t in node["spec"].get("taints") or [] if t["effect"] == "NoSchedule"]

    taint = (await wait_for(tainted))[0]
    assert taint["key"] == "node.kubernetes.io/unschedulable"
    for i in range(4):
        await core.create_namespaced_pod(NS, pod(f"q{i}"))
    pods = [await wait_for(partial(running, kube, f"q{i}")) for i in range(4)]
    assert {p["spec"]["nodeName"] for p in pods} == {"sandbox-node-2", "sandbox-node-3"}
    await cordon(core, "sandbox-node", False)
    await wait_for(lambda: not tainted())


async def test_a_pod_tolerating_the_unschedulable_taint_may_land_on_a_cordoned_node(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    kube, core = cluster
    for node in WORKERS:
        await cordon(core, node)
    tolerant = pod(
        "tolerant",
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
    )
    await core.create_namespaced_pod(NS, tolerant)
    assert (await wait_for(lambda: running(kube, "tolerant")))["spec"]["nodeName"] in WORKERS


async def test_a_deleted_node_has_its_pods_failed_and_deleted_by_pod_gc(
    cluster: tuple[KubeEmulator, client.CoreV1Api],
) -> None:
    kube, core = cluster
    for node in ("sandbox-node", "sandbox-node-2"):
        await cordon(core, node)
    await core.create_namespaced_pod(NS, pod("doomed"))
    assert (await wait_for(lambda: running(kube, "doomed")))["spec"]["nodeName"] == (
        "sandbox-node-3"
    )
    seen: list[Obj] = []
    sub = kube.store.subscribe({("", "pods")})
    try:
        await core.delete_node("sandbox-node-3")
        await wait_for(lambda: stored(kube, "doomed") is None)
        while not sub.queue.empty():
            item = sub.queue.get_nowait()
            if isinstance(item, Event):
                seen.append(item.obj)
    finally:
        kube.store.unsubscribe(sub)
    failed = next(p for p in seen if p["status"].get("phase") == "Failed")
    target = next(c for c in failed["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["reason"], target["message"]) == (
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )


def test_a_node_selector_that_matches_no_node_is_in_the_message() -> None:
    nodes: list[Obj] = [
        {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {}}
        for name in WORKERS
    ]
    nodes[2]["spec"]["unschedulable"] = True
    placement = schedule(
        pod("p", nodeSelector={"disk": "ssd"}), nodes=nodes, runnable=WORKERS, pods=[]
    )
    assert placement.node is None
    assert placement.message == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's "
        "node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not "
        "helpful for scheduling."
    )
    nodes[1]["metadata"]["labels"]["disk"] = "ssd"
    assert schedule(
        pod("p", nodeSelector={"disk": "ssd"}), nodes=nodes, runnable=WORKERS, pods=[]
    ).node == ("sandbox-node-2")
