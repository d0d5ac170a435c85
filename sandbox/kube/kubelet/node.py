"""The nodes the simulated kubelet runs: their Node objects, registered with a Ready status.

One node by default (`sandbox-node`); with more, `sandbox-node-2`, `sandbox-node-3`, ... Each has
its own InternalIP (10.0.0.10, .11, ...) and pod CIDR (10.244.0.0/24 for the first; 10.244.1.0/24
is the control plane's, so the others take 10.244.2.0/24 onwards).
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.registry import Registry
from sandbox.kube.store import Store

Obj = dict[str, Any]

NODE_NAME = "sandbox-node"
NODE_IP = "10.0.0.10"
MAX_NODES = 200


def node_names(count: int) -> tuple[str, ...]:
    """The names of the kubelet's `count` nodes: `sandbox-node`, `sandbox-node-2`, ..."""
    return tuple(NODE_NAME if i == 0 else f"{NODE_NAME}-{i + 1}" for i in range(count))


def node_ip(index: int) -> str:
    return f"10.0.0.{10 + index}"


def pod_subnet(index: int) -> str:
    """The first three octets of the pod CIDR of the node at `index`."""
    return f"10.244.{0 if index == 0 else index + 1}"


def register_node(
    registry: Registry, store: Store, *, name: str = NODE_NAME, index: int = 0
) -> None:
    """Create the Node and write its status, unless it exists."""
    rt = registry.catalog.preferred("", "nodes")
    if rt is None or store.get(rt.key, "", name) is not None:
        return
    created = registry.create(rt, ns="", body=node_object(name=name, index=index))
    cur = store.get(rt.key, "", created["metadata"]["name"])
    if cur is not None:
        new = copy.deepcopy(cur)
        new["status"] = node_status(timestamp(registry.clock()), name=name, index=index)
        registry.commit(rt, cur=cur, new=new, subresource="status")


def node_object(*, name: str = NODE_NAME, index: int = 0) -> Obj:
    cidr = f"{pod_subnet(index)}.0/24"
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
    }


def node_status(now: str, *, name: str = NODE_NAME, index: int = 0) -> Obj:
    return {
        "addresses": [
            {"type": "InternalIP", "address": node_ip(index)},
            {"type": "Hostname", "address": name},
        ],
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "conditions": [
            {
                "type": t,
                "status": "False",
                "reason": r,
                "message": m,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for t, r, m in (
                (
                    "MemoryPressure",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            )
        ]
        + [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "osImage": "gha-runner-scaler sandbox",
            "kernelVersion": "6.1.0",
            "containerRuntimeVersion": "sandbox://1.0",
            "kubeletVersion": "v1.32.4",
            "kubeProxyVersion": "v1.32.4",
            "machineID": name,
            "systemUUID": name,
            "bootID": name,
        },
    }
