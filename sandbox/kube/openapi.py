"""OpenAPI v3: the `/openapi/v3` index and one document per group-version (docs/sandbox-kube.md,
"OpenAPI v3").

Built-in kinds' schemas are derived from kubernetes-asyncio's generated models (`openapi_types`
and `attribute_map` give each field's JSON name and type, the property docstrings its
description, a setter that refuses None marks it required); custom resources' schemas are their
CRD's `openAPIV3Schema`. Paths carry only each kind's `get` operation, which `kubectl explain`
follows from the resource to its schema; without `patch` operations kubectl keeps its OpenAPI v2
behaviour for client-side apply and validation (server-side field validation).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from typing import Any

from sandbox.kube.patch import MERGE_KEYS, SET_LISTS
from sandbox.kube.resources import Catalog, ResourceType

Obj = dict[str, Any]

META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1"
# The apimachinery types that live under META_PREFIX rather than a kind's group-version.
META_TYPES = frozenset(
    {
        "ObjectMeta",
        "ListMeta",
        "OwnerReference",
        "ManagedFieldsEntry",
        "LabelSelector",
        "LabelSelectorRequirement",
        "Condition",
        "Status",
        "StatusDetails",
        "StatusCause",
    }
)
_VERSIONED = re.compile(r"^(?:[A-Z][a-z]+)?V\d+(?:(?:alpha|beta)\d+)?")
_PORT_KEYS = {"ContainerPort": "containerPort", "ServicePort": "port"}
_SCALARS: dict[str, Obj] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int32"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "object": {"type": "object"},
}
_REF = "#/components/schemas/"


def path_of(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _group_prefix(group: str, version: str) -> str:
    if "." in group and not group.endswith(".k8s.io"):
        # A custom resource group, reversed as the real server names CRD schemas.
        return ".".join([*reversed(group.split(".")), version])
    return f"io.k8s.api.{group.split('.')[0] or 'core'}.{version}"


def _model(group: str, version: str, kind: str) -> type | None:
    """kubernetes-asyncio's model class of a built-in kind (`V1Pod`, `CoreV1Event`...)."""
    # Imported here: the standalone server loads the client's models only when asked for them.
    from kubernetes_asyncio import client

    ver = version[:1].upper() + version[1:]
    prefix = (group.split(".")[0] or "core").capitalize()
    for name in (f"{ver}{kind}", f"{prefix}{ver}{kind}"):
        model = getattr(client, name, None)
        if isinstance(model, type) and hasattr(model, "openapi_types"):
            return model
    return None


def _description(model: type, attr: str) -> str:
    prop = getattr(model, attr, None)
    doc = getattr(getattr(prop, "fget", None), "__doc__", "") or ""
    lines = [line.replace("# noqa: E501", "").strip() for line in doc.splitlines()[1:]]
    text = []
    for line in lines:
        if line.startswith(":return:"):
            break
        if line:
            text.append(line)
    return " ".join(text)


@functools.cache
def _validation_config() -> Any:
    from kubernetes_asyncio import client

    return client.Configuration()


def _required(model: type, attr: str) -> bool:
    """Whether the generated model refuses None for `attr` (the schema's `required`)."""
    prop = getattr(model, attr, None)
    setter = getattr(prop, "fset", None)
    if setter is None:
        return False
    probe: Any = object.__new__(model)
    probe.local_vars_configuration = _validation_config()
    try:
        setter(probe, None)
    except ValueError:
        return True
    return False


class _Builder:
    """Schemas of one group-version document, collected as models are referenced."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.schemas: dict[str, Obj] = {}

    def name(self, model_name: str) -> str:
        bare = _VERSIONED.sub("", model_name)
        return f"{META_PREFIX}.{bare}" if bare in META_TYPES else f"{self.prefix}.{bare}"

    def ref(self, model_name: str) -> Obj:
        from kubernetes_asyncio import client

        name = self.name(model_name)
        if name not in self.schemas:
            self.schemas[name] = {}
            self.schemas[name] = self.model(getattr(client, model_name))
        return {"allOf": [{"$ref": _REF + name}], "default": {}}

    def type_of(self, spec: str) -> Obj:
        if spec in _SCALARS:
            return dict(_SCALARS[spec])
        if spec.startswith("list[") and spec.endswith("]"):
            return {"type": "array", "items": self.type_of(spec[5:-1])}
        if spec.startswith("dict(") and spec.endswith(")"):
            return {
                "type": "object",
                "additionalProperties": self.type_of(spec[5:-1].split(", ", 1)[1]),
            }
        return self.ref(spec)

    def model(self, model: type) -> Obj:
        types: dict[str, str] = getattr(model, "openapi_types", {})
        names: dict[str, str] = getattr(model, "attribute_map", {})
        properties: Obj = {}
        required = []
        for attr, spec in types.items():
            field = names.get(attr, attr)
            prop = self.type_of(spec)
            description = _description(model, attr)
            if description:
                prop["description"] = description
            item = spec[5:-1] if spec.startswith("list[") else ""
            key = _PORT_KEYS.get(_VERSIONED.sub("", item)) or MERGE_KEYS.get(field)
            if item.startswith("V") and key:
                prop["x-kubernetes-patch-merge-key"] = key
                prop["x-kubernetes-patch-strategy"] = "merge"
            elif field in SET_LISTS:
                prop["x-kubernetes-patch-strategy"] = "merge"
                prop["x-kubernetes-list-type"] = "set"
            properties[field] = prop
            if _required(model, attr):
                required.append(field)
        out: Obj = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        return out


@functools.cache
def _builtin_document(rts: tuple[ResourceType, ...]) -> Obj:
    builder = _Builder(_group_prefix(rts[0].group, rts[0].version))
    paths: Obj = {}
    for rt in rts:
        model = _model(rt.group, rt.version, rt.kind)
        if model is None:
            continue
        builder.ref(model.__name__)
        name = builder.name(model.__name__)
        builder.schemas[name]["x-kubernetes-group-version-kind"] = [
            {"group": rt.group, "version": rt.version, "kind": rt.kind}
        ]
        if not rt.virtual:
            path, item = _get_path(rt, name)
            paths[path] = item
    return _document(builder.schemas, paths)


def _get_path(rt: ResourceType, schema: str) -> tuple[str, Obj]:
    scope = "namespaces/{namespace}/" if rt.namespaced else ""
    path = f"/{path_of(rt.group, rt.version)}/{scope}{rt.plural}/{{name}}"
    operation = {
        "operationId": f"read{rt.kind}",
        "responses": {
            "200": {
                "description": "OK",
                "content": {"application/json": {"schema": {"$ref": _REF + schema}}},
            }
        },
        "x-kubernetes-action": "get",
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
    }
    return path, {"get": operation}


def _document(schemas: dict[str, Obj], paths: Obj) -> Obj:
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.4"},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def _crd_document(group: str, version: str, rts: list[ResourceType]) -> Obj:
    builder = _Builder(_group_prefix(group, version))
    meta = builder.ref("V1ObjectMeta")["allOf"][0]["$ref"]
    paths: Obj = {}
    for rt in rts:
        schema: Obj = copy.deepcopy(rt.schema) if rt.schema else {"type": "object"}
        props: Obj = schema.setdefault("properties", {})
        props["apiVersion"] = {
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of "
            "an object.",
        }
        props["kind"] = {
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object "
            "represents.",
        }
        props["metadata"] = {
            "allOf": [{"$ref": meta}],
            "description": "Standard object's metadata.",
        }
        schema["x-kubernetes-group-version-kind"] = [
            {"group": group, "version": version, "kind": rt.kind}
        ]
        name = f"{builder.prefix}.{rt.kind}"
        builder.schemas[name] = schema
        path, item = _get_path(rt, name)
        paths[path] = item
    return _document(builder.schemas, paths)


def _group_versions(catalog: Catalog) -> dict[tuple[str, str], list[ResourceType]]:
    out: dict[tuple[str, str], list[ResourceType]] = {}
    for rt in catalog.all():
        out.setdefault((rt.group, rt.version), []).append(rt)
    return out


def document(catalog: Catalog, path: str) -> Obj | None:
    """The OpenAPI v3 document of `api/v1` or `apis/{group}/{version}`; None if not served."""
    for (group, version), rts in _group_versions(catalog).items():
        if path_of(group, version) != path:
            continue
        crds = [rt for rt in rts if rt.crd]
        if crds:
            return _crd_document(group, version, crds)
        return _builtin_document(tuple(sorted(rts, key=lambda rt: rt.plural)))
    return None


def _hash(doc: Obj) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()


def index(catalog: Catalog) -> Obj:
    """`/openapi/v3`: every group-version document with the URL (and content hash) to fetch."""
    paths: Obj = {}
    for group, version in sorted(_group_versions(catalog)):
        path = path_of(group, version)
        doc = document(catalog, path)
        assert doc is not None
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(doc)}"}
    return {"paths": paths}
