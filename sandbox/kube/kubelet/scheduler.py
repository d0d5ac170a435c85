"""The scheduler's decision for one pod, as a pure value
(docs/sandbox-kube.md#nodes-and-the-scheduler).

The filters of kube-scheduler's default profile that the emulator's pods can meet, in its order,
the first that refuses a node giving that node's reason: NodeUnschedulable (a cordoned node,
unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`), NodeAffinity
(`spec.nodeSelector` only) and TaintToleration (NoSchedule and NoExecute taints). Of the nodes
left, the one with the fewest bound, unfinished pods wins (ties: node order), where the real
scheduler's scores (balanced allocation, default topology spread) mostly spread such pods too.
When no node fits, the message is the real scheduler's FitError: the count of nodes, then each
reason with how many nodes gave it, sorted, then the preemption plugin's verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sandbox.kube.kinds.pods import TERMINAL_PHASES

Obj = dict[str, Any]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True)
class Placement:
    """A node for the pod, or None and the PodScheduled=False message."""

    node: str | None
    message: str = ""


def _tolerates(pod: Obj, taint: Obj) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if not isinstance(toleration, dict):
            continue
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        if key and key != taint.get("key"):
            continue
        if (toleration.get("operator") or "Equal") == "Exists":
            return True
        if (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def refusal(pod: Obj, node: Obj) -> str | None:
    """Why the filters refuse `node` for `pod`, or None when it fits."""
    spec = node.get("spec") or {}
    if spec.get("unschedulable") and not _tolerates(
        pod, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    ):
        return UNSCHEDULABLE
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return SELECTOR
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
            key, value = taint.get("key", ""), taint.get("value", "")
            return f"node(s) had untolerated taint {{{key}: {value}}}"
    return None


def schedule(
    pod: Obj, *, nodes: list[Obj], runnable: Iterable[str], pods: Iterable[Obj]
) -> Placement:
    """Where `pod` goes among `nodes`; only those in `runnable` (the simulated kubelet's) can
    take it, the others still count in the message."""
    allowed = set(runnable)
    reasons: Counter[str] = Counter()
    fits: list[str] = []
    for node in nodes:
        why = refusal(pod, node)
        if why is not None:
            reasons[why] += 1
        elif node["metadata"]["name"] in allowed:
            fits.append(node["metadata"]["name"])
    if len(fits) == 1:
        return Placement(fits[0])
    if fits:
        load = Counter(
            (p.get("spec") or {}).get("nodeName")
            for p in pods
            if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES
        )
        order = {name: i for i, name in enumerate(fits)}
        return Placement(min(fits, key=lambda name: (load[name], order[name])))
    total = len(nodes)
    histogram = sorted(f"{count} {why}" for why, count in reasons.items())
    message = f"0/{total} nodes are available:"
    if histogram:
        message += f" {', '.join(histogram)}."
    message += (
        f" preemption: 0/{total} nodes are available: {total} Preemption is not helpful for "
        "scheduling."
    )
    return Placement(None, message)
