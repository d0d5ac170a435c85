"""The Pod strategy: the defaults a real server fills in, the spec fields an update may change,
and graceful deletion of pods on a node."""

from __future__ import annotations

import copy
import re
from typing import Any

from sandbox.kube.kinds import shapes
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
# The DefaultTolerationSeconds admission plugin's two tolerations.
DEFAULT_TOLERATIONS = tuple(
    {
        "key": f"node.kubernetes.io/{key}",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    for key in ("not-ready", "unreachable")
)
RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("SCTP", "TCP", "UDP")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def prepare_create(obj: Obj) -> None:
    shapes.check("Pod", shapes.POD, obj)
    default_pod(obj)
    add_default_tolerations(obj["spec"])


def prepare_update(rt: ResourceType, *, new: Obj, cur: Obj) -> None:
    shapes.check("Pod", shapes.POD, new)
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


def add_default_tolerations(spec: Obj) -> None:
    """Tolerate a not-ready or unreachable node for 300 s, unless the pod already says how."""
    tolerations = spec.setdefault("tolerations", [])
    if any(
        not t.get("key")
        and t.get("operator") == "Exists"
        and t.get("effect") in ("NoExecute", None, "")
        for t in tolerations
    ):
        return
    for default in DEFAULT_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") in ("NoExecute", None, "")
            for t in tolerations
        ):
            tolerations.append(dict(default))


def default_pod(obj: Obj) -> None:
    """The defaults a real server fills into a Pod, so clients read back what they expect."""
    spec = obj.setdefault("spec", {})
    default_pod_spec(spec)
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def default_pod_spec(spec: Obj) -> None:
    """The defaults of a PodSpec, in a Pod or in a workload's pod template."""
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
            for port in c.get("ports") or []:
                port.setdefault("protocol", "TCP")


def causes(spec: Obj, *, path: str = "spec") -> list[Cause]:
    """The PodSpec validation a real server applies, with its field paths and words."""
    out: list[Cause] = []
    containers = spec.get("containers") or []
    if not containers:
        out.append(Cause("FieldValueRequired", field=f"{path}.containers", detail=""))
    volumes = _volume_causes(spec.get("volumes") or [], f"{path}.volumes", out)
    seen: set[str] = set()
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or []):
            where = f"{path}.{key}[{i}]"
            out.extend(_container_causes(c, where, seen))
            for j, mount in enumerate(c.get("volumeMounts") or []):
                _mount_causes(mount, f"{where}.volumeMounts[{j}]", volumes, out)
    for i, toleration in enumerate(spec.get("tolerations") or []):
        _toleration_causes(toleration, f"{path}.tolerations[{i}]", out)
    _supported(out, spec, "restartPolicy", RESTART_POLICIES, path)
    _supported(out, spec, "dnsPolicy", DNS_POLICIES, path)
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        out.append(
            Cause(
                "FieldValueInvalid",
                field=f"{path}.terminationGracePeriodSeconds",
                detail=f"{grace}: must be greater than or equal to 0",
            )
        )
    return out


def _volume_causes(volumes: list[Obj], path: str, out: list[Cause]) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        name = volume.get("name")
        if not name:
            out.append(Cause("FieldValueRequired", field=f"{path}[{i}].name", detail=""))
        elif not DNS_LABEL.match(name) or len(name) > 63:
            out.append(
                Cause(
                    "FieldValueInvalid", field=f"{path}[{i}].name", detail=f'"{name}": {LABEL_MSG}'
                )
            )
        elif name in names:
            out.append(Cause("FieldValueDuplicate", field=f"{path}[{i}].name", detail=f'"{name}"'))
        names.add(name or "")
        if len([k for k in volume if k != "name"]) != 1:
            out.append(
                Cause(
                    "FieldValueRequired" if len(volume) <= 1 else "FieldValueForbidden",
                    field=f"{path}[{i}]",
                    detail="must specify a volume type"
                    if len(volume) <= 1
                    else "may not specify more than 1 volume type",
                )
            )
    return names


def _mount_causes(mount: Obj, path: str, volumes: set[str], out: list[Cause]) -> None:
    name = mount.get("name")
    if not name:
        out.append(Cause("FieldValueRequired", field=f"{path}.name", detail=""))
    elif name not in volumes:
        out.append(Cause("FieldValueNotFound", field=f"{path}.name", detail=f'"{name}"'))
    if not mount.get("mountPath"):
        out.append(Cause("FieldValueRequired", field=f"{path}.mountPath", detail=""))


def _toleration_causes(toleration: Obj, path: str, out: list[Cause]) -> None:
    operator = toleration.get("operator") or "Equal"
    _supported(out, toleration, "operator", ("Equal", "Exists", ""), path)
    _supported(out, toleration, "effect", ("NoSchedule", "PreferNoSchedule", "NoExecute", ""), path)
    if operator == "Exists" and toleration.get("value"):
        out.append(
            Cause(
                "FieldValueInvalid",
                field=f"{path}.operator",
                detail=f'"{toleration["value"]}": value must be empty when `operator` is '
                "'Exists'",
            )
        )
    if not toleration.get("key") and operator != "Exists":
        out.append(
            Cause(
                "FieldValueInvalid",
                field=f"{path}.operator",
                detail=f'"{operator}": operator must be Exists when `key` is empty, which means '
                '"match all values and all keys"',
            )
        )


def _supported(out: list[Cause], obj: Obj, key: str, values: tuple[str, ...], path: str) -> None:
    value = obj.get(key)
    if value is not None and value not in values:
        supported = ", ".join(f'"{v}"' for v in values)
        out.append(
            Cause(
                "FieldValueNotSupported",
                field=f"{path}.{key}",
                detail=f'"{value}": supported values: {supported}',
            )
        )


def _container_causes(c: Obj, path: str, seen: set[str]) -> list[Cause]:
    out: list[Cause] = []
    name = c.get("name")
    if not name:
        out.append(Cause("FieldValueRequired", field=f"{path}.name", detail=""))
    elif not DNS_LABEL.match(name) or len(name) > 63:
        out.append(
            Cause("FieldValueInvalid", field=f"{path}.name", detail=f'"{name}": {LABEL_MSG}')
        )
    elif name in seen:
        out.append(Cause("FieldValueDuplicate", field=f"{path}.name", detail=f'"{name}"'))
    else:
        seen.add(name)
    if not c.get("image"):
        out.append(Cause("FieldValueRequired", field=f"{path}.image", detail=""))
    _supported(out, c, "imagePullPolicy", PULL_POLICIES, path)
    for j, port in enumerate(c.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            out.append(
                Cause(
                    "FieldValueRequired" if number is None else "FieldValueInvalid",
                    field=f"{path}.ports[{j}].containerPort",
                    detail=""
                    if number is None
                    else f"{number}: must be between 1 and 65535, inclusive",
                )
            )
        _supported(out, port, "protocol", PROTOCOLS, f"{path}.ports[{j}]")
    for j, var in enumerate(c.get("env") or []):
        out.extend(_env_causes(var, f"{path}.env[{j}]"))
    for j, source in enumerate(c.get("envFrom") or []):
        refs = [k for k in ("configMapRef", "secretRef") if k in source]
        if len(refs) != 1:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"{path}.envFrom[{j}]",
                    detail='"": may not have more than one field specified at a time'
                    if refs
                    else '"": must specify one of: `configMapRef` or `secretRef`',
                )
            )
        for ref in refs:
            if not source[ref].get("name"):
                out.append(
                    Cause("FieldValueRequired", field=f"{path}.envFrom[{j}].{ref}.name", detail="")
                )
    return out


def _env_causes(var: Obj, path: str) -> list[Cause]:
    name = var.get("name")
    if not name:
        return [Cause("FieldValueRequired", field=f"{path}.name", detail="")]
    if not _ENV_NAME.match(name):
        return [
            Cause(
                "FieldValueInvalid",
                field=f"{path}.name",
                detail=f'"{name}": a valid environment variable name must consist of alphabetic '
                "characters, digits, '_', '-', or '.', and must not start with a digit",
            )
        ]
    source = var.get("valueFrom")
    if source is None:
        return []
    refs = [
        k
        for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
        if k in source
    ]
    if len(refs) != 1:
        return [
            Cause(
                "FieldValueInvalid",
                field=f"{path}.valueFrom",
                detail='"": may not have more than one field specified at a time'
                if refs
                else '"": must specify one of: `fieldRef`, `resourceFieldRef`, '
                "`configMapKeyRef` or `secretKeyRef`",
            )
        ]
    if var.get("value"):
        return [
            Cause(
                "FieldValueInvalid",
                field=f"{path}.valueFrom",
                detail='"": may not be specified when `value` is not empty',
            )
        ]
    ref, out = source[refs[0]], []
    required = {
        "fieldRef": ("fieldPath",),
        "resourceFieldRef": ("resource",),
        "configMapKeyRef": ("key",),
        "secretKeyRef": ("key",),
    }[refs[0]]
    for key in required:
        if not ref.get(key):
            out.append(
                Cause("FieldValueRequired", field=f"{path}.valueFrom.{refs[0]}.{key}", detail="")
            )
    return out


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
