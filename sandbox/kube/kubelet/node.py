"""The one node the kubelet runs: its Node object, registered with a Ready status."""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.registry import Registry
from sandbox.kube.store import Store

Obj = dict[str, Any]

NODE_NAME = "sandbox-node"
NODE_IP = "10.0.0.10"


def register_node(registry: Registry, store: Store) -> None:
    """Create the Node and write its status, unless it exists."""
    rt = registry.catalog.preferred("", "nodes")
    if rt is None or store.get(rt.key, "", NODE_NAME) is not None:
        return
    created = registry.create(rt, ns="", body=node_object())
    cur = store.get(rt.key, "", created["metadata"]["name"])
    if cur is not None:
        new = copy.deepcopy(cur)
        new["status"] = node_status(timestamp(registry.clock()))
        registry.commit(rt, cur=cur, new=new, subresource="status")


def node_object() -> Obj:
    return {
        "metadata": {
            "name": NODE_NAME,
            "labels": {
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": NODE_NAME,
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"]},
    }


def node_status(now: str) -> Obj:
    return {
        "addresses": [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "Hostname", "address": NODE_NAME},
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
            "machineID": "sandbox",
            "systemUUID": "sandbox",
            "bootID": "sandbox",
        },
    }
