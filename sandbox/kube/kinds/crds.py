"""The CustomResourceDefinition strategy: its status (names accepted, established), its
validation, and serving the kinds it defines from the moment it is written until it is removed
(with every object of those kinds)."""

from __future__ import annotations

from typing import Any

from sandbox.kube.clock import timestamp, utcnow
from sandbox.kube.resources import Catalog, crd_types
from sandbox.kube.status import Cause
from sandbox.kube.store import Store

Obj = dict[str, Any]


def prepare(obj: Obj) -> None:
    """On create and update: the status a real server reports at once."""
    obj["status"] = _status(obj)


def after_write(catalog: Catalog, crd: Obj) -> None:
    catalog.remove_crd(crd["metadata"]["name"])
    for t in crd_types(crd):
        catalog.add(t)


def after_remove(catalog: Catalog, store: Store, crd: Obj) -> None:
    name = crd["metadata"]["name"]
    keys = {t.key for t in catalog.all() if t.crd == name}
    catalog.remove_crd(name)
    for key in keys:
        for item in list(store.items(key)):
            store.remove(key, item)


def _status(crd: Obj) -> Obj:
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    now = timestamp(utcnow())
    return {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": names,
        "storedVersions": storage,
    }


def causes(crd: Obj) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for k in ("plural", "kind"):
        if not names.get(k):
            out.append(Cause("FieldValueRequired", field=f"spec.names.{k}", detail=""))
    if not spec.get("group"):
        out.append(Cause("FieldValueRequired", field="spec.group", detail=""))
    versions = spec.get("versions") or []
    if not versions:
        out.append(
            Cause(
                "FieldValueRequired",
                field="spec.versions",
                detail="must have exactly one version marked as storage version",
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        out.append(
            Cause(
                "FieldValueInvalid",
                field="spec.versions",
                detail="must have exactly one version marked as storage version",
            )
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        out.append(
            Cause(
                "FieldValueNotSupported",
                field="spec.scope",
                detail=f'"{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
            )
        )
    name = crd["metadata"]["name"]
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        out.append(
            Cause(
                "FieldValueInvalid",
                field="metadata.name",
                detail=f'"{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    return out
