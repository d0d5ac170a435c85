"""Structural-schema handling for custom resources (docs/sandbox-kube.md#custom-resources).

The apiextensions-apiserver order is: prune unknown fields (and nulls where not nullable), apply
defaults, then validate. Field errors carry the JSON path the real server reports
(`spec.replicas`, `spec.containers[0].name`) and the same wording.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from sandbox.kube.status import Cause

Obj = dict[str, Any]

_TYPE_NAMES = {
    "object": "object",
    "array": "array",
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
}


def _go_value(value: Any) -> str:
    """How field.Invalid renders a bad value: strings quoted, the rest as JSON."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return json.dumps(value)


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


@functools.lru_cache(maxsize=256)
def _go_regexp(pattern: str) -> re.Pattern[str]:
    """A schema `pattern` with Go's (RE2's) anchors: `$` and `\\z` end the text. Python's `$`
    also matches before a final newline, which would pass `"name\\n"` where the real server
    refuses it."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            out.append("Z" if char == "z" and not in_class else char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == "]":
            in_class = False
            out.append(char)
        else:
            out.append("\\Z" if char == "$" and not in_class else char)
    return re.compile("".join(out))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune_and_default(schema: Obj, obj: Any, *, dropped: list[str] | None = None) -> Any:
    """Drop fields the schema does not know and apply `default` values.

    The JSON paths of dropped fields are appended to `dropped`, for fieldValidation.
    """
    return _prune(schema, obj, path="", dropped=dropped if dropped is not None else [], root=True)


def _preserves(schema: Obj) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def _prune(schema: Obj, value: Any, *, path: str, dropped: list[str], root: bool = False) -> Any:
    if isinstance(value, dict):
        props: Obj = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        out: Obj = {}
        for key, item in value.items():
            if (root or embedded) and key in ("apiVersion", "kind", "metadata"):
                out[key] = item
                continue
            sub = props.get(key)
            if sub is None and isinstance(additional, dict):
                sub = additional
            if sub is None:
                if _preserves(schema) or additional is True:
                    out[key] = item
                else:
                    dropped.append(_join(path, key))
                continue
            if item is None and not sub.get("nullable"):
                continue
            out[key] = _prune(sub, item, path=_join(path, key), dropped=dropped)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                default = json.loads(json.dumps(sub["default"]))
                out[key] = _prune(sub, default, path=_join(path, key), dropped=[])
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            return [
                _prune(items, v, path=f"{path}[{i}]", dropped=dropped) if v is not None else v
                for i, v in enumerate(value)
            ]
        return value
    return value


def validate(schema: Obj, obj: Any, *, old: Any = None) -> list[Cause]:
    """Field errors of `obj` against an openAPIV3Schema, in the real server's words.

    On an update (`old` given), an error of a value the update did not change is dropped, as the
    real server's validation ratcheting does (CRDValidationRatcheting, on by default since
    1.30): a CRD that gained a constraint still lets objects made before it be written, their
    status included, as long as the write leaves the offending value as it was. Values inside
    a list are not correlated (the real server correlates only `listType: map` items).
    """
    causes: list[Cause] = []
    _validate(schema, obj, path="", causes=causes, root=True)
    if old is None:
        return causes
    return [cause for cause in causes if not _unchanged(cause.field, obj, old)]


_MISSING = object()


def _at_path(obj: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _unchanged(path: str, new: Any, old: Any) -> bool:
    if not path or "[" in path:
        return False
    before = _at_path(old, path)
    return before is not _MISSING and before == _at_path(new, path)


def _validate(
    schema: Obj, value: Any, *, path: str, causes: list[Cause], root: bool = False
) -> None:
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    field=path,
                    detail=f'null: {path} in body must be of type {schema["type"]}: "null"',
                )
            )
        return
    want = schema.get("type")
    int_or_string = schema.get("x-kubernetes-int-or-string")
    got = _type_of(value)
    if int_or_string:
        if got not in ("integer", "string"):
            causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    field=path,
                    detail=f"{_go_value(value)}: {path} in body must be of type "
                    f'integer,string: "{got}"',
                )
            )
            return
    elif (
        want and want in _TYPE_NAMES and not (want == "number" and got == "integer") and got != want
    ):
        causes.append(
            Cause(
                "FieldValueTypeInvalid",
                field=path,
                detail=f'{_go_value(value)}: {path} in body must be of type {want}: "{got}"',
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        causes.append(
            Cause(
                "FieldValueNotSupported",
                field=path,
                detail=f"{_go_value(value)}: supported values: {supported}",
            )
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    field=path,
                    detail=f"{value}: {path} in body should be greater than or equal to "
                    f"{schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    field=path,
                    detail=f"{value}: {path} in body should be less than or equal to "
                    f"{schema['maximum']}",
                )
            )
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    field=path,
                    detail=f"{_go_value(value)}: {path} in body should be at least "
                    f"{schema['minLength']} chars long",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(
                Cause(
                    "FieldValueTooLong",
                    field=path,
                    detail=f"may not be more than {schema['maxLength']} bytes",
                )
            )
        if "pattern" in schema and not _go_regexp(schema["pattern"]).search(value):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    field=path,
                    detail=f"{_go_value(value)}: {path} in body should match '{schema['pattern']}'",
                )
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    field=path,
                    detail=f"{path} in body should have at least {schema['minItems']} items",
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(
                Cause(
                    "FieldValueTooMany",
                    field=path,
                    detail=f"must have at most {schema['maxItems']} items",
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _validate(items, item, path=f"{path}[{i}]", causes=causes)
    if isinstance(value, dict):
        props: Obj = schema.get("properties") or {}
        for req in schema.get("required") or []:
            if req not in value:
                causes.append(Cause("FieldValueRequired", field=_join(path, req), detail=""))
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key)
            if sub is None and isinstance(additional, dict):
                sub = additional
            if sub is not None:
                _validate(sub, item, path=_join(path, key), causes=causes)
    for sub in schema.get("allOf") or []:
        _validate(sub, value, path=path, causes=causes)
