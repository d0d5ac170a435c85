"""The subresources that write part of an object: `scale` (autoscaling/v1 Scale over
`spec.replicas`), `approval` (a CertificateSigningRequest's conditions) and `finalize` (a
Namespace's `spec.finalizers`). `status` is generic and stays in the registry."""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube.status import Cause

Obj = dict[str, Any]

# Subresources a client reads and writes through the registry (status included).
WRITABLE = ("status", "scale", "approval", "finalize")
READABLE = ("status", "scale", "approval")


def selector_string(selector: Any) -> str:
    """A label selector (map or LabelSelector) in the string form Scale.status.selector uses."""
    if not isinstance(selector, dict):
        return ""
    labels = selector.get("matchLabels")
    expressions = selector.get("matchExpressions")
    if labels is None and expressions is None:
        labels, expressions = selector, []
    parts = [f"{k}={v}" for k, v in sorted((labels or {}).items())]
    for expr in expressions or []:
        if not isinstance(expr, dict):
            continue
        key, op = expr.get("key", ""), str(expr.get("operator", "")).lower()
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        if op in ("in", "notin"):
            parts.append(f"{key} {op} ({values})")
        elif op == "exists":
            parts.append(str(key))
        elif op == "doesnotexist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_of(obj: Obj) -> Obj:
    """The autoscaling/v1 Scale a `/scale` GET answers for a workload object."""
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": spec.get("replicas", 0)},
        "status": {
            "replicas": status.get("replicas", 0),
            "selector": selector_string(spec.get("selector")),
        },
    }


def replicas_causes(scale: Any) -> list[Cause]:
    """What the Scale validation rejects: spec.replicas absent from an object, or negative."""
    spec = scale.get("spec") if isinstance(scale, dict) else None
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return [Cause("FieldValueInvalid", field="spec.replicas", detail="must be an integer")]
    if replicas < 0:
        return [
            Cause(
                "FieldValueInvalid",
                field="spec.replicas",
                detail=f"{replicas}: must be greater than or equal to 0",
            )
        ]
    return []


def with_scale(cur: Obj, scale: Obj) -> Obj:
    """The object after a Scale write: only spec.replicas changes."""
    new = copy.deepcopy(cur)
    new.setdefault("spec", {})["replicas"] = scale["spec"].get("replicas", 0)
    return new


def with_part(cur: Obj, new: Any, subresource: str) -> Obj:
    """The object after an `approval` or `finalize` write: only that part changes."""
    result = copy.deepcopy(cur)
    body = new if isinstance(new, dict) else {}
    if subresource == "approval":
        conditions = (body.get("status") or {}).get("conditions")
        status = result.setdefault("status", {})
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
    else:
        finalizers = (body.get("spec") or {}).get("finalizers")
        result.setdefault("spec", {})["finalizers"] = finalizers or []
    return result
