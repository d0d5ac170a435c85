"""The PATCH body formats: JSON merge patch, JSON patch and strategic merge patch
(docs/sandbox-kube.md#writes).

Strategic merge patch is implemented for the list fields of the core types this project touches
(merge keys by field name, `$patch` and `$deleteFromPrimitiveList` directives); everything else
merges like RFC 7386. Custom resources never get here with SMP: they answer 415.
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube.status import ApiError, bad_request

Obj = dict[str, Any]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
APPLY_CBOR = "application/apply-patch+cbor"

MAX_JSON_PATCH_OPS = 10000

# patchMergeKey of the list fields in k8s.io/api the emulator's users patch.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "name",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "secrets": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
}
# Ports merge by containerPort inside containers and by port inside Services.
PORT_KEYS = ("containerPort", "port")
SET_LISTS = ("finalizers",)


class PatchFailed(Exception):
    """A patch that parsed but could not be applied (422 in the real server)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchFailed(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchFailed(f"path does not exist: /{'/'.join(parts)}")
            cur = cur[part]
        elif isinstance(cur, list):
            idx = _index(cur, part, allow_end=False)
            cur = cur[idx]
        else:
            raise PatchFailed(f"path does not exist: /{'/'.join(parts)}")
    return cur


def _index(seq: list[Any], part: str, *, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(seq)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise PatchFailed(f"invalid array index: {part}")
    idx = int(part)
    if idx > len(seq) or (idx == len(seq) and not allow_end):
        raise PatchFailed(f"array index out of bounds: {idx}")
    return idx


def _add(doc: Any, parts: list[str], *, value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchFailed("add to a non-container")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchFailed("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"unable to remove nonexistent key: {last}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, allow_end=False))
    raise PatchFailed("remove from a non-container")


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 with the `test` op; a failed operation raises PatchFailed (answered 422)."""
    if not isinstance(ops, list):
        raise bad_request(
            "error decoding patch: json: cannot unmarshal object into Go value of type "
            "jsonpatch.Patch"
        )
    if len(ops) > MAX_JSON_PATCH_OPS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            message=f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPS}, "
            f"got {len(ops)}",
        )
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise bad_request("error decoding patch: each operation needs op and a string path")
        if "from" in op and not isinstance(op["from"], str):
            raise bad_request("error decoding patch: from must be a string")
        # A missing or non-string op is "unknown" to the server's JSON patch library.
        kind = op["op"] if isinstance(op.get("op"), str) else "unknown"
        parts = _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, value=copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _walk(doc, parts)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                _remove(doc, parts)
                doc = _add(doc, parts, value=copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, value=value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchFailed(
                    f"testing value {op['path']} failed: test operation does not apply: "
                    f"doc is missing path or value does not match"
                )
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        for key in PORT_KEYS:
            if items and all(isinstance(i, dict) and key in i for i in items):
                return key
        return None
    return MERGE_KEYS.get(field)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch over JSON, with the merge keys of MERGE_KEYS."""
    if not isinstance(patch, dict):
        raise bad_request("strategic merge patch body must be a JSON object")
    return _smp_object(target if isinstance(target, dict) else {}, patch)


def _smp_object(target: Obj, patch: Obj) -> Obj:
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    result = dict(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = _smp_object(result.get(key) or {}, value)
        elif isinstance(value, list):
            result[key] = _smp_list(key, result.get(key), patch=value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(field: str, current: Any, *, patch: list[Any]) -> list[Any]:
    cur = list(current) if isinstance(current, list) else []
    if field in SET_LISTS:
        out = list(cur)
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    key = _merge_key(field, [p for p in patch if isinstance(p, dict) and "$patch" not in p] or cur)
    if key is None or not all(isinstance(p, dict) for p in patch):
        return copy.deepcopy(patch)
    out = [copy.deepcopy(c) for c in cur]
    for item in patch:
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        idx = next(
            (i for i, c in enumerate(out) if isinstance(c, dict) and c.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            out[idx] = _smp_object(out[idx], item)
    return out
