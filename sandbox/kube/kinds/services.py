"""The Service strategy: the defaults a real server fills in, the validation of ports and
types, and the allocation of cluster IPs (from the service CIDR 10.96.0.0/12, each unique) and
node ports (30000-32767) (docs/sandbox-kube.md#services)."""

from __future__ import annotations

import ipaddress
import itertools
from collections.abc import Iterable
from typing import Any

from sandbox.kube.kinds import shapes
from sandbox.kube.kinds.pods import DNS_LABEL, LABEL_MSG, PROTOCOLS
from sandbox.kube.status import ApiError, Cause, invalid

Obj = dict[str, Any]

SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
# The first addresses are kept for static assignment (kubernetes 10.96.0.1, kube-dns
# 10.96.0.10), as the real allocator prefers dynamic addresses above its static band.
DYNAMIC_START = 256
NODE_PORTS = range(30000, 32768)
TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def prepare_create(obj: Obj, *, others: Iterable[Obj]) -> None:
    shapes.check("Service", shapes.SERVICE, obj)
    spec = obj.setdefault("spec", {})
    _default(spec)
    obj["status"] = {"loadBalancer": {}}
    _raise(obj, validate(spec))
    _allocate(obj, list(others))


def prepare_update(new: Obj, cur: Obj, *, others: Iterable[Obj]) -> None:
    shapes.check("Service", shapes.SERVICE, new)
    spec = new.setdefault("spec", {})
    old = cur.get("spec") or {}
    same_type = spec.get("type", "ClusterIP") == old.get("type")
    if same_type and "clusterIP" not in spec and "clusterIPs" not in spec:
        for key in ("clusterIP", "clusterIPs"):
            if key in old:
                spec[key] = old[key]
    old_node_ports = {
        (p.get("port"), p.get("protocol", "TCP")): p["nodePort"]
        for p in old.get("ports") or []
        if p.get("nodePort")
    }
    for port in spec.get("ports") or []:
        kept = old_node_ports.get((port.get("port"), port.get("protocol", "TCP")))
        if kept and "nodePort" not in port and spec.get("type") in ("NodePort", "LoadBalancer"):
            port["nodePort"] = kept
    _default(spec)
    causes = validate(spec)
    if (
        old.get("clusterIP")
        and spec.get("clusterIP") not in (None, old["clusterIP"])
        and spec.get("type") != "ExternalName"
    ):
        causes.append(
            Cause(
                "FieldValueInvalid",
                field="spec.clusterIPs[0]",
                detail=f'"{spec["clusterIP"]}": may not change once set',
            )
        )
    _raise(new, causes)
    _allocate(new, [o for o in others if o["metadata"]["uid"] != cur["metadata"]["uid"]])


def _raise(obj: Obj, causes: list[Cause]) -> None:
    if causes:
        raise invalid("Service", group="", name=obj["metadata"].get("name", ""), causes=causes)


def _default(spec: Obj) -> None:
    kind = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") and "clusterIPs" not in spec:
        spec["clusterIPs"] = [spec["clusterIP"]]
    elif spec.get("clusterIPs") and "clusterIP" not in spec:
        spec["clusterIP"] = spec["clusterIPs"][0]
    if kind != "ExternalName":
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if "port" in port:
            port.setdefault("targetPort", port["port"])


def validate(spec: Obj) -> list[Cause]:
    """The Service validation a real server applies, with its field paths and words."""
    out: list[Cause] = []
    kind = spec.get("type")
    _supported(out, spec, "type", TYPES)
    _supported(out, spec, "sessionAffinity", ("ClientIP", "None"))
    _supported(out, spec, "internalTrafficPolicy", ("Cluster", "Local"))
    _supported(out, spec, "externalTrafficPolicy", ("Cluster", "Local"))
    _supported(out, spec, "ipFamilyPolicy", ("SingleStack", "PreferDualStack", "RequireDualStack"))
    if spec.get("ipFamilyPolicy") == "RequireDualStack":
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.ipFamilyPolicy",
                detail='"RequireDualStack": this cluster is not configured for dual-stack services',
            )
        )
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family != "IPv4":
            out.append(
                Cause(
                    "FieldValueInvalid" if family == "IPv6" else "FieldValueNotSupported",
                    field=f"spec.ipFamilies[{i}]",
                    detail=f'"{family}": not configured on this cluster'
                    if family == "IPv6"
                    else f'"{family}": supported values: "IPv4", "IPv6"',
                )
            )
    headless = spec.get("clusterIP") == "None"
    if kind == "ExternalName":
        if not spec.get("externalName"):
            out.append(Cause("FieldValueRequired", field="spec.externalName", detail=""))
        if spec.get("clusterIP"):
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field="spec.clusterIPs",
                    detail=f'"{spec["clusterIP"]}": may not be set for ExternalName services',
                )
            )
    elif headless and kind != "ClusterIP":
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.clusterIPs[0]",
                detail=f"\"None\": may not be set to 'None' for {kind} services",
            )
        )
    elif not spec.get("ports") and not headless:
        out.append(Cause("FieldValueRequired", field="spec.ports", detail=""))
    ips = spec.get("clusterIPs") or []
    if ips and spec.get("clusterIP") != ips[0]:
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.clusterIPs[0]",
                detail=f'"{ips[0]}": must be same as clusterIP',
            )
        )
    for i, ip in enumerate(ips):
        if ip == "None" and i == 0:
            continue
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"spec.clusterIPs[{i}]",
                    detail=f'"{ip}": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
                )
            )
    ports = spec.get("ports") or []
    names: set[str] = set()
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        name = port.get("name")
        if not name:
            if len(ports) > 1:
                out.append(Cause("FieldValueRequired", field=f"{path}.name", detail=""))
        elif not DNS_LABEL.match(name) or len(name) > 63:
            out.append(
                Cause("FieldValueInvalid", field=f"{path}.name", detail=f'"{name}": {LABEL_MSG}')
            )
        elif name in names:
            out.append(Cause("FieldValueDuplicate", field=f"{path}.name", detail=f'"{name}"'))
        names.add(name or "")
        number = port.get("port", 0)
        if not 1 <= number <= 65535:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"{path}.port",
                    detail=f"{number}: must be between 1 and 65535, inclusive",
                )
            )
        target = port.get("targetPort")
        if isinstance(target, int) and not 1 <= target <= 65535:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"{path}.targetPort",
                    detail=f"{target}: must be between 1 and 65535, inclusive",
                )
            )
        _supported(out, port, "protocol", PROTOCOLS, path=path)
        node_port = port.get("nodePort")
        if node_port is not None and kind not in ("NodePort", "LoadBalancer"):
            out.append(
                Cause(
                    "FieldValueForbidden",
                    field=f"{path}.nodePort",
                    detail=f"may not be used when `type` is '{kind}'",
                )
            )
        elif node_port is not None and node_port not in NODE_PORTS:
            out.append(
                Cause(
                    "FieldValueInvalid",
                    field=f"{path}.nodePort",
                    detail=f"{node_port}: provided port is not in the valid range. The range of "
                    "valid ports is 30000-32767",
                )
            )
    return out


def _supported(
    out: list[Cause], obj: Obj, key: str, values: tuple[str, ...], *, path: str = "spec"
) -> None:
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


def _allocate(obj: Obj, others: list[Obj]) -> None:
    """Give the Service its cluster IP and node ports, each unique among `others`."""
    spec = obj["spec"]
    name = obj["metadata"].get("name", "")
    if spec["type"] == "ExternalName":
        return
    used_ips = {ip for o in others for ip in (o.get("spec") or {}).get("clusterIPs") or []}
    wanted = spec.get("clusterIP")
    if wanted and wanted != "None":
        if ipaddress.ip_address(wanted) not in SERVICE_CIDR:
            raise _allocation_error(
                name,
                wanted,
                f"the provided IP ({wanted}) is not in the valid range. The range of valid IPs "
                f"is {SERVICE_CIDR}",
            )
        if wanted in used_ips:
            raise _allocation_error(name, wanted, "provided IP is already allocated")
    elif not wanted:
        hosts = itertools.islice(SERVICE_CIDR.hosts(), DYNAMIC_START, None)
        ip = next(str(h) for h in hosts if str(h) not in used_ips)
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
    if spec["type"] in ("NodePort", "LoadBalancer"):
        used_ports = {
            p["nodePort"]
            for o in others
            for p in (o.get("spec") or {}).get("ports") or []
            if p.get("nodePort")
        }
        free = (p for p in NODE_PORTS if p not in used_ports)
        for i, port in enumerate(spec.get("ports") or []):
            if port.get("nodePort") in used_ports:
                raise invalid(
                    "Service",
                    group="",
                    name=name,
                    causes=[
                        Cause(
                            "FieldValueInvalid",
                            field=f"spec.ports[{i}].nodePort",
                            detail=f"{port['nodePort']}: provided port is already allocated",
                        )
                    ],
                )
            if "nodePort" not in port:
                port["nodePort"] = next(free)
            used_ports.add(port["nodePort"])


def _allocation_error(name: str, ip: str, why: str) -> ApiError:
    return invalid(
        "Service",
        group="",
        name=name,
        causes=[
            Cause(
                "FieldValueInvalid",
                field="spec.clusterIPs",
                detail=f'[]string{{"{ip}"}}: failed to allocate IP {ip}: {why}',
            )
        ],
    )
