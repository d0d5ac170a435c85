"""Container environments, resolved from the pod, its secrets and its configmaps."""

from __future__ import annotations

import base64
from typing import Any

from sandbox.kube.store import Store

Obj = dict[str, Any]


class MissingReference(Exception):
    """A secret, configmap or key an env var needs does not exist (CreateContainerConfigError)."""


def resolve_env(store: Store, pod: Obj, container: Obj) -> dict[str, str]:
    """The container's environment resolved as a kubelet does: `value` with $(VAR) expansion,
    `valueFrom` secret, configmap and field references, `envFrom` with prefixes; a missing
    reference that is not optional raises MissingReference."""
    ns = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref = source["configMapRef"]
            cm = store.get(("", "configmaps"), ns, ref.get("name", ""))
            if cm is None:
                if ref.get("optional"):
                    continue
                raise MissingReference(f'configmap "{ref.get("name")}" not found')
            env.update({prefix + k: v for k, v in (cm.get("data") or {}).items()})
        if "secretRef" in source:
            ref = source["secretRef"]
            secret = store.get(("", "secrets"), ns, ref.get("name", ""))
            if secret is None:
                if ref.get("optional"):
                    continue
                raise MissingReference(f'secret "{ref.get("name")}" not found')
            env.update(
                {
                    prefix + k: base64.b64decode(v).decode()
                    for k, v in (secret.get("data") or {}).items()
                }
            )
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = _expand(str(var.get("value", "")), env)
            continue
        source = var["valueFrom"]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = store.get(("", "secrets"), ns, ref.get("name", ""))
            data = (secret or {}).get("data") or {}
            if ref.get("key") not in data:
                if ref.get("optional"):
                    continue
                what = "secret" if secret is None else f"key {ref.get('key')} in secret"
                raise MissingReference(f'{what} "{ref.get("name")}" not found')
            env[name] = base64.b64decode(data[ref["key"]]).decode()
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            cm = store.get(("", "configmaps"), ns, ref.get("name", ""))
            data = (cm or {}).get("data") or {}
            if ref.get("key") not in data:
                if ref.get("optional"):
                    continue
                what = "configmap" if cm is None else f"key {ref.get('key')} in configmap"
                raise MissingReference(f'{what} "{ref.get("name")}" not found')
            env[name] = str(data[ref["key"]])
        elif "fieldRef" in source:
            env[name] = _field_ref(pod, source["fieldRef"].get("fieldPath", ""))
        elif "resourceFieldRef" in source:
            env[name] = "0"
    return env


def _field_ref(pod: Obj, path: str) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIPs": ",".join(p["ip"] for p in status.get("podIPs") or []),
        "status.hostIPs": ",".join(p["ip"] for p in status.get("hostIPs") or []),
    }
    if path in simple:
        return str(simple[path])
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise MissingReference(f"unsupported fieldRef {path}")


def _expand(value: str, env: dict[str, str]) -> str:
    """$(VAR) references to earlier variables, as the kubelet expands them."""
    for k, v in env.items():
        value = value.replace(f"$({k})", v)
    return value
