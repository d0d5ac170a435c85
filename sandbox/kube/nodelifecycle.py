"""Two node-related loops of kube-controller-manager, simulated
(docs/sandbox-kube.md#nodes-and-the-scheduler).

- Node lifecycle (TaintNodeByCondition): a node with `spec.unschedulable` (`kubectl cordon`) gets
  the taint `node.kubernetes.io/unschedulable:NoSchedule`, removed again on uncordon.
- Pod garbage collection of orphaned pods: when a Node is deleted, each pod bound to it is marked
  `Failed` with the condition DisruptionTarget (reason `DeletionByPodGC`, "PodGC: node no longer
  exists") unless it already finished, then deleted with grace 0. The real collector looks every
  20 s and waits 40 s for the node to come back; here it acts on the deletion.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.kinds.pods import TERMINAL_PHASES
from sandbox.kube.kubelet.podstatus import set_condition
from sandbox.kube.kubelet.scheduler import UNSCHEDULABLE_TAINT
from sandbox.kube.registry import Registry
from sandbox.kube.status import ApiError
from sandbox.kube.store import Event, Store, TypeKey

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.nodelifecycle")

NODES: TypeKey = ("", "nodes")
PODS: TypeKey = ("", "pods")


def with_unschedulable_taint(node: Obj, *, now: str) -> Obj | None:
    """The node with its unschedulable taint in line with `spec.unschedulable`; None when it
    already is."""
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    has = any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints)
    if bool(spec.get("unschedulable")) == has:
        return None
    new = copy.deepcopy(node)
    kept = [t for t in taints if t.get("key") != UNSCHEDULABLE_TAINT]
    if spec.get("unschedulable"):
        kept.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": now})
    if kept:
        new["spec"]["taints"] = kept
    else:
        new["spec"].pop("taints", None)
    return new


class NodeLifecycle:
    def __init__(self, *, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store

    async def run(self) -> None:
        sub = self.store.subscribe({NODES})
        try:
            while True:
                item = await sub.queue.get()
                if not isinstance(item, Event):
                    continue
                try:
                    if item.type == "DELETED":
                        self._collect(item.obj["metadata"]["name"])
                    else:
                        self._taint(item.obj)
                except ApiError as exc:
                    log.debug("node controller write failed: %s", exc.message)
        finally:
            self.store.unsubscribe(sub)

    def _taint(self, node: Obj) -> None:
        rt = self.registry.catalog.preferred(*NODES)
        cur = self.store.get(NODES, "", node["metadata"]["name"])
        if rt is None or cur is None:
            return
        new = with_unschedulable_taint(cur, now=timestamp(self.registry.clock()))
        if new is not None:
            self.registry.commit(rt, cur=cur, new=new)

    def _collect(self, node: str) -> None:
        rt = self.registry.catalog.preferred(*PODS)
        if rt is None or self.store.get(NODES, "", node) is not None:
            return
        for pod in list(self.store.items(PODS)):
            if (pod.get("spec") or {}).get("nodeName") != node:
                continue
            meta = pod["metadata"]
            if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                new = copy.deepcopy(pod)
                status = new.setdefault("status", {})
                status["phase"] = "Failed"
                set_condition(
                    status,
                    "DisruptionTarget",
                    value="True",
                    now=timestamp(self.registry.clock()),
                    reason="DeletionByPodGC",
                    message="PodGC: node no longer exists",
                )
                self.registry.commit(rt, cur=pod, new=new, subresource="status")
            try:
                self.registry.delete(
                    rt,
                    ns=meta["namespace"],
                    name=meta["name"],
                    options={"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
                )
            except ApiError as exc:
                log.debug("pod GC delete failed: %s", exc.message)
