"""Discovery documents, /version, the OpenAPI answers kubectl needs, and server-side Tables.

Discovery is built from the live catalog, so a CRD's kinds appear as soon as it is created
(docs/sandbox-kube.md#discovery-tables-and-protobuf). Both legacy discovery and the aggregated
form (apidiscovery.k8s.io v2) that kubectl 1.32 asks for first are served.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

from sandbox.kube.resources import Catalog, ResourceType

Obj = dict[str, Any]

VERSION_INFO: Obj = {
    "major": "1",
    "minor": "32",
    "emulationMajor": "1",
    "emulationMinor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "59526cd4867447956156ae3a602fcbac10a2c335",
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T16:03:26Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}


# Kubernetes' preferred-version order: GA, then beta, then alpha, newest first.
def _version_priority(v: str) -> tuple[int, int, int]:
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", v)
    if not m:
        return (3, 0, 0)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor)


def sorted_versions(versions: list[str]) -> list[str]:
    return sorted(versions, key=_version_priority)


def api_versions(host: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _resource_entries(rt: ResourceType) -> list[Obj]:
    entry: Obj = {
        "name": rt.plural,
        "singularName": rt.singular_name(),
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": sorted(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    out = [entry]
    for sub in rt.subresources or (("status",) if rt.status else ()):
        sub_entry: Obj = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["get", "patch", "update"],
        }
        if sub == "token":
            sub_entry.update(
                kind="TokenRequest", group="authentication.k8s.io", version="v1", verbs=["create"]
            )
        elif sub == "log":
            sub_entry.update(verbs=["get"])
        elif sub == "eviction":
            # kubectl drain evicts through the group version this entry names.
            sub_entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
        elif sub == "finalize":
            sub_entry.update(verbs=["update"])
        elif sub == "scale":
            sub_entry.update(kind="Scale", group="autoscaling", version="v1")
        out.append(sub_entry)
    return out


def resource_list(catalog: Catalog, *, group: str, version: str) -> Obj | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [e for rt in types for e in _resource_entries(rt)],
    }


def _group(name: str, versions: list[str]) -> Obj:
    ordered = sorted_versions(versions)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(catalog: Catalog) -> Obj:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(g, vs) for g, vs in catalog.groups().items() if g],
    }


def api_group(catalog: Catalog, name: str) -> Obj | None:
    versions = catalog.groups().get(name)
    if not versions or not name:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def aggregated(catalog: Catalog, *, core: bool) -> Obj:
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api (core) or /apis."""
    items = []
    for group, versions in catalog.groups().items():
        if bool(group) == core:
            continue
        vers = []
        for v in sorted_versions(versions):
            resources = []
            for rt in catalog.in_group_version(group, v):
                res: Obj = {
                    "resource": rt.plural,
                    "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
                    "scope": "Namespaced" if rt.namespaced else "Cluster",
                    "singularResource": rt.singular_name(),
                    "verbs": sorted(rt.verbs),
                }
                if rt.short_names:
                    res["shortNames"] = list(rt.short_names)
                if rt.categories:
                    res["categories"] = list(rt.categories)
                subs = []
                for e in _resource_entries(rt)[1:]:
                    subs.append(
                        {
                            "subresource": e["name"].split("/", 1)[1],
                            "responseKind": {
                                "group": e.get("group", rt.group),
                                "version": e.get("version", rt.version),
                                "kind": e["kind"],
                            },
                            "verbs": e["verbs"],
                        }
                    )
                if subs:
                    res["subresources"] = subs
                resources.append(res)
            vers.append({"version": v, "resources": resources, "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": vers})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def _age(created: str, now: dt.datetime) -> str:
    try:
        then = dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except (TypeError, ValueError):
        return "<unknown>"
    secs = max(int((now - then).total_seconds()), 0)
    if secs < 120:
        return f"{secs}s"
    if secs < 3600 * 2:
        return f"{secs // 60}m"
    if secs < 86400 * 2:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _json_path(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not part:
            continue
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _pod_cells(pod: Obj) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    reason = status.get("phase", "Pending")
    for s in statuses:
        state = s.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason"):
            reason = state["terminated"]["reason"]
    if pod.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts]


def _node_status(node: Obj) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = [c for c in conditions if c.get("type") == "Ready"]
    state = "Ready" if ready and ready[0].get("status") == "True" else "NotReady"
    return f"{state},SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else state


def _node_roles(node: Obj) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(
        {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    return ",".join(r for r in roles if r) or "<none>"


def _service_ports(service: Obj) -> str:
    ports = (service.get("spec") or {}).get("ports") or []
    out = []
    for p in ports:
        node_port = f":{p['nodePort']}" if p.get("nodePort") else ""
        out.append(f"{p.get('port')}{node_port}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _csr_condition(csr: Obj) -> str:
    status = csr.get("status") or {}
    types = [
        c.get("type")
        for c in status.get("conditions") or []
        if c.get("type") in ("Approved", "Denied", "Failed") and c.get("status", "True") == "True"
    ]
    if status.get("certificate"):
        types.append("Issued")
    return ",".join(types) or "Pending"


def _role_ref(binding: Obj) -> str:
    ref = binding.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


Cell = Callable[[Obj], Any]


def _at(path: str) -> Cell:
    return lambda obj: _json_path(obj, path)


# The columns the built-in printers (pkg/printers/internalversion) show, for the kinds served.
BUILTIN_COLUMNS: dict[tuple[str, str], list[tuple[str, str, Cell]]] = {
    ("", "pods"): [
        ("Ready", "string", lambda o: _pod_cells(o)[0]),
        ("Status", "string", lambda o: _pod_cells(o)[1]),
        ("Restarts", "integer", lambda o: _pod_cells(o)[2]),
    ],
    ("", "namespaces"): [("Status", "string", lambda o: (o.get("status") or {}).get("phase"))],
    ("", "nodes"): [
        ("Status", "string", _node_status),
        ("Roles", "string", _node_roles),
        (
            "Version",
            "string",
            lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion"),
        ),
    ],
    ("", "services"): [
        ("Type", "string", lambda o: (o.get("spec") or {}).get("type")),
        ("Cluster-IP", "string", lambda o: (o.get("spec") or {}).get("clusterIP") or "<none>"),
        ("External-IP", "string", lambda o: (o.get("spec") or {}).get("externalName") or "<none>"),
        ("Port(s)", "string", _service_ports),
    ],
    ("certificates.k8s.io", "certificatesigningrequests"): [
        ("SignerName", "string", lambda o: (o.get("spec") or {}).get("signerName")),
        ("Requestor", "string", lambda o: (o.get("spec") or {}).get("username")),
        (
            "RequestedDuration",
            "string",
            lambda o: (o.get("spec") or {}).get("expirationSeconds") or "<none>",
        ),
        ("Condition", "string", _csr_condition),
    ],
    ("", "secrets"): [
        ("Type", "string", lambda o: o.get("type")),
        ("Data", "string", lambda o: len(o.get("data") or {})),
    ],
    ("", "configmaps"): [
        ("Data", "string", lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))
    ],
    ("", "serviceaccounts"): [("Secrets", "string", lambda o: len(o.get("secrets") or []))],
    ("coordination.k8s.io", "leases"): [
        ("Holder", "string", lambda o: (o.get("spec") or {}).get("holderIdentity", ""))
    ],
    ("policy", "poddisruptionbudgets"): [
        ("Min Available", "string", lambda o: (o.get("spec") or {}).get("minAvailable", "N/A")),
        (
            "Max Unavailable",
            "string",
            lambda o: (o.get("spec") or {}).get("maxUnavailable", "N/A"),
        ),
        (
            "Allowed Disruptions",
            "integer",
            lambda o: (o.get("status") or {}).get("disruptionsAllowed", 0),
        ),
    ],
    ("rbac.authorization.k8s.io", "rolebindings"): [("Role", "string", _role_ref)],
    ("rbac.authorization.k8s.io", "clusterrolebindings"): [("Role", "string", _role_ref)],
}


def table(rt: ResourceType, objects: list[Obj], *, list_meta: Obj, now: dt.datetime) -> Obj:
    """A meta.k8s.io/v1 Table, as kubectl's `get` asks for."""
    cells: list[tuple[str, str, Cell]] = list(BUILTIN_COLUMNS.get(rt.key, []))
    formats: dict[str, str] = {}
    for col in rt.printer_columns:
        path = col.get("jsonPath", "")
        if path == ".metadata.creationTimestamp":
            continue
        formats[col["name"]] = col.get("format", "")
        cells.append((col["name"], col.get("type", "string"), _at(path)))
    columns: list[Obj] = [
        {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}
    ]
    columns += [
        {
            "name": name,
            "type": typ,
            "format": formats.get(name, ""),
            "description": name,
            "priority": 0,
        }
        for name, typ, _ in cells
    ]
    columns.append(
        {"name": "Age", "type": "string", "format": "", "description": "Age", "priority": 0}
    )
    rows = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        row: list[Any] = [meta.get("name", "")]
        row += [cell(obj) for _, _, cell in cells]
        row.append(_age(meta.get("creationTimestamp", ""), now))
        rows.append({"cells": row, "object": obj})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
