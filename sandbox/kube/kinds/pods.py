"""The Pod strategy: the defaults a real server fills in, the spec fields an update may change,
and graceful deletion of pods on a node."""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube.resources import ResourceType
from sandbox.kube.status import Cause, invalid

Obj = dict[str, Any]

POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)
TERMINAL_PHASES = ("Succeeded", "Failed")


def prepare_create(obj: Obj) -> None:
    default_pod(obj)


def prepare_update(rt: ResourceType, *, new: Obj, cur: Obj) -> None:
    default_pod(new)
    if _spec_frozen(new.get("spec") or {}) != _spec_frozen(cur.get("spec") or {}):
        raise invalid(
            rt.kind,
            group=rt.group,
            name=cur["metadata"]["name"],
            causes=[Cause("FieldValueForbidden", field="spec", detail=POD_UPDATE_FORBIDDEN)],
        )


def grace(cur: Obj, *, opts: Obj) -> int:
    """Pods on a node with a live phase terminate gracefully; others at once (0)."""
    spec, status = cur.get("spec") or {}, cur.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in TERMINAL_PHASES:
        return 0
    seconds = opts.get("gracePeriodSeconds")
    if seconds is None:
        seconds = spec.get("terminationGracePeriodSeconds", 30)
    current = cur["metadata"].get("deletionGracePeriodSeconds")
    if current is not None:
        seconds = min(int(seconds), int(current))
    return max(int(seconds), 0)


def default_pod(obj: Obj) -> None:
    """The defaults a real server fills into a Pod, so clients read back what they expect."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        spec.setdefault("serviceAccountName", spec.get("serviceAccount"))
    else:
        spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = spec["serviceAccountName"]
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(c, dict):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            image = str(c.get("image", ""))
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def _spec_frozen(spec: Obj) -> Obj:
    """The part of a pod spec an update may not change (pod strategy ValidatePodUpdate)."""
    frozen = copy.deepcopy(spec)
    for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
        frozen.pop(key, None)
    for key in ("containers", "initContainers"):
        for container in frozen.get(key) or []:
            if isinstance(container, dict):
                container.pop("image", None)
    return frozen


def _qos_class(spec: Obj) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits")
        and all(k in r["limits"] for k in ("cpu", "memory"))
        and all(
            (r.get("requests") or r["limits"]).get(k) == r["limits"][k] for k in ("cpu", "memory")
        )
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"
