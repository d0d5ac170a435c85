"""The strategies of the built-in kinds that have no controller here (ReplicationControllers,
Ingresses, NetworkPolicies, CertificateSigningRequests, APIServices, CSIStorageCapacities,
PodDisruptionBudgets (kinds/disruptionbudgets.py; their controller is sandbox/kube/disruption.py),
and the immutable `roleRef` of RoleBindings and ClusterRoleBindings):
they are stored and read back with the defaults and validation the real server applies
(docs/sandbox-kube.md#built-in-kinds)."""

from __future__ import annotations

from typing import Any

from sandbox.kube.clock import timestamp, utcnow
from sandbox.kube.kinds import disruptionbudgets, pods, shapes
from sandbox.kube.resources import ResourceType
from sandbox.kube.status import Cause, invalid
from sandbox.kube.store import ACTOR

Obj = dict[str, Any]

RCS = ("", "replicationcontrollers")
INGRESSES = ("networking.k8s.io", "ingresses")
NETWORK_POLICIES = ("networking.k8s.io", "networkpolicies")
CSRS = ("certificates.k8s.io", "certificatesigningrequests")
APISERVICES = ("apiregistration.k8s.io", "apiservices")
CAPACITIES = ("storage.k8s.io", "csistoragecapacities")
BINDINGS = {
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
}
PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def prepare_create(rt: ResourceType, obj: Obj) -> None:
    if rt.key == RCS:
        shapes.check(rt.kind, shapes.TEMPLATED, obj)
        _default_rc(obj)
        obj["status"] = {"replicas": 0}
    elif rt.key == INGRESSES:
        obj["status"] = {"loadBalancer": {}}
    elif rt.key == NETWORK_POLICIES:
        _default_network_policy(obj)
    elif rt.key == CSRS:
        obj["spec"] = {**_dict(obj.get("spec")), "username": ACTOR.get()}
        obj["status"] = {}
    elif rt.key == APISERVICES:
        obj["status"] = _apiservice_status(obj)
    elif rt.key == disruptionbudgets.PDBS:
        disruptionbudgets.prepare_create(obj)


def prepare_update(rt: ResourceType, *, new: Obj, cur: Obj) -> None:
    if rt.key in BINDINGS and new.get("roleRef") != cur.get("roleRef"):
        # The real server refuses it: a binding's role is fixed; delete and re-create it.
        raise invalid(
            rt.kind,
            group=rt.group,
            name=cur["metadata"]["name"],
            causes=[Cause("FieldValueInvalid", field="roleRef", detail="cannot change roleRef")],
        )
    if rt.key == RCS:
        shapes.check(rt.kind, shapes.TEMPLATED, new)
        _default_rc(new)
    elif rt.key == NETWORK_POLICIES:
        _default_network_policy(new)
    elif rt.key == CSRS:
        new["spec"] = cur.get("spec") or {}
    elif rt.key == disruptionbudgets.PDBS:
        disruptionbudgets.prepare_update(new)


def causes(rt: ResourceType, obj: Obj) -> list[Cause]:
    spec = _dict(obj.get("spec"))
    if rt.key == RCS:
        return _rc_causes(spec)
    if rt.key == INGRESSES:
        return _ingress_causes(spec)
    if rt.key == CSRS:
        return _csr_causes(obj)
    if rt.key == APISERVICES:
        return _apiservice_causes(obj["metadata"]["name"], spec)
    if rt.key == disruptionbudgets.PDBS:
        return disruptionbudgets.causes(obj)
    if rt.key == CAPACITIES and not obj.get("storageClassName"):
        return [Cause("FieldValueRequired", field="storageClassName", detail="")]
    return []


def _default_rc(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels:
        spec.setdefault("selector", dict(labels))
        if not obj["metadata"].get("labels"):
            obj["metadata"]["labels"] = dict(labels)
    pods.default_pod_spec(template.setdefault("spec", {}))


def _rc_causes(spec: Obj) -> list[Cause]:
    out: list[Cause] = []
    replicas = spec.get("replicas", 1)
    if replicas < 0:
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.replicas",
                detail=f"{replicas}: must be greater than or equal to 0",
            )
        )
    selector = spec.get("selector") or {}
    if not selector:
        out.append(Cause("FieldValueRequired", field="spec.selector", detail=""))
    template = spec.get("template")
    if not isinstance(template, dict):
        if replicas:
            out.append(Cause("FieldValueRequired", field="spec.template", detail=""))
        return out
    labels = (template.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.template.metadata.labels",
                detail="`selector` does not match template `labels`",
            )
        )
    out.extend(pods.causes(template.get("spec") or {}, path="spec.template.spec"))
    return out


def _default_network_policy(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("podSelector", {})
    if "policyTypes" not in spec:
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]
    for direction in ("ingress", "egress"):
        rules = spec.get(direction)
        for rule in rules if isinstance(rules, list) else []:
            ports = rule.get("ports") if isinstance(rule, dict) else None
            for port in ports if isinstance(ports, list) else []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def _ingress_causes(spec: Obj) -> list[Cause]:
    out: list[Cause] = []
    rules = spec.get("rules") or []
    rules = rules if isinstance(rules, list) else []
    if not spec.get("defaultBackend") and not rules:
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec",
                detail="either `defaultBackend` or `rules` must be specified",
            )
        )
    for i, rule in enumerate(rules):
        paths = _dict(_dict(rule).get("http")).get("paths") or []
        for j, path in enumerate(paths if isinstance(paths, list) else []):
            where = f"spec.rules[{i}].http.paths[{j}]"
            path_type = _dict(path).get("pathType")
            if not path_type:
                out.append(Cause("FieldValueRequired", field=f"{where}.pathType", detail=""))
            elif path_type not in PATH_TYPES:
                out.append(
                    Cause(
                        "FieldValueNotSupported",
                        field=f"{where}.pathType",
                        detail=f'"{path_type}": supported values: "Exact", '
                        '"ImplementationSpecific", "Prefix"',
                    )
                )
            if not _dict(path).get("backend"):
                out.append(Cause("FieldValueRequired", field=f"{where}.backend", detail=""))
    return out


def _csr_causes(obj: Obj) -> list[Cause]:
    spec = _dict(obj.get("spec"))
    out = [
        Cause("FieldValueRequired", field=f"spec.{key}", detail="")
        for key in ("request", "signerName", "usages")
        if not spec.get(key)
    ]
    conditions = _dict(obj.get("status")).get("conditions")
    conditions = conditions if isinstance(conditions, list) else []
    types = [c.get("type") for c in conditions if isinstance(c, dict)]
    for i, condition in enumerate(conditions):
        if not isinstance(condition, dict) or not condition.get("type"):
            out.append(Cause("FieldValueRequired", field=f"status.conditions[{i}].type", detail=""))
        elif condition.get("status", "True") not in ("True", "False", "Unknown"):
            out.append(
                Cause(
                    "FieldValueNotSupported",
                    field=f"status.conditions[{i}].status",
                    detail=f'"{condition["status"]}": supported values: "False", "True", "Unknown"',
                )
            )
    if "Approved" in types and "Denied" in types:
        out.append(
            Cause(
                "FieldValueInvalid",
                field=f"status.conditions[{types.index('Denied')}].type",
                detail='"Denied": Approved and Denied conditions are mutually exclusive',
            )
        )
    return out


def _apiservice_causes(name: str, spec: Obj) -> list[Cause]:
    version, group = spec.get("version"), spec.get("group", "")
    out = []
    if not version:
        out.append(Cause("FieldValueRequired", field="spec.version", detail=""))
    elif name != f"{version}.{group}":
        out.append(
            Cause(
                "FieldValueInvalid",
                field="metadata.name",
                detail=f'"{name}": must be `spec.version+"."+spec.group`: "{version}.{group}"',
            )
        )
    return out


def _apiservice_status(obj: Obj) -> Obj:
    """What the aggregator's availability controller reports: local groups are Available, a
    group behind a Service is not, since no aggregated server runs here."""
    service = _dict(_dict(obj.get("spec")).get("service"))
    now = timestamp(utcnow())
    if not service:
        condition = {
            "status": "True",
            "reason": "Local",
            "message": "Local APIServices are always available",
        }
    else:
        condition = {
            "status": "False",
            "reason": "ServiceNotFound",
            "message": f'service/{service.get("name")} in "{service.get("namespace")}" is not '
            "present",
        }
    return {"conditions": [{"type": "Available", "lastTransitionTime": now, **condition}]}
