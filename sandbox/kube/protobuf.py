"""Decoding the Kubernetes protobuf bodies kubectl 1.32 sends for objects it builds itself.

`kubectl create namespace|secret|configmap|serviceaccount|token|role|rolebinding|clusterrole|
clusterrolebinding` and `kubectl auth can-i` send
`application/vnd.kubernetes.protobuf` with no JSON fallback
(docs/sandbox-kube.md#discovery-tables-and-protobuf). The envelope is `k8s\\0` +
runtime.Unknown{typeMeta, raw}; `raw` is the object's own message. Only the kinds kubectl
creates are described here, with field numbers from k8s.io/api's generated.proto.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from sandbox.kube.status import ApiError

Obj = dict[str, Any]
Field = tuple[str, str, Any]
Schema = dict[int, Field]

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"

TIME: Schema = {1: ("seconds", "int", None), 2: ("nanos", "int", None)}
OWNER_REF: Schema = {
    1: ("kind", "string", None),
    3: ("name", "string", None),
    4: ("uid", "string", None),
    5: ("apiVersion", "string", None),
    6: ("controller", "bool", None),
    7: ("blockOwnerDeletion", "bool", None),
}
OBJECT_META: Schema = {
    1: ("name", "string", None),
    2: ("generateName", "string", None),
    3: ("namespace", "string", None),
    5: ("uid", "string", None),
    6: ("resourceVersion", "string", None),
    7: ("generation", "int", None),
    8: ("creationTimestamp", "time", None),
    11: ("labels", "map_string", None),
    12: ("annotations", "map_string", None),
    13: ("ownerReferences", "repeated_message", OWNER_REF),
    14: ("finalizers", "repeated_string", None),
}
NAME_REF: Schema = {1: ("name", "string", None)}
OBJECT_REF: Schema = {
    1: ("kind", "string", None),
    2: ("namespace", "string", None),
    3: ("name", "string", None),
    4: ("uid", "string", None),
    5: ("apiVersion", "string", None),
}
RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", None),
    2: ("verb", "string", None),
    3: ("group", "string", None),
    4: ("version", "string", None),
    5: ("resource", "string", None),
    6: ("subresource", "string", None),
    7: ("name", "string", None),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string", None), 2: ("verb", "string", None)}
BOUND_OBJECT_REF: Schema = {
    1: ("kind", "string", None),
    2: ("apiVersion", "string", None),
    3: ("name", "string", None),
    4: ("uid", "string", None),
}

KINDS: dict[str, Schema] = {
    "Namespace": {
        1: ("metadata", "message", OBJECT_META),
        2: ("spec", "message", {1: ("finalizers", "repeated_string", None)}),
    },
    "Secret": {
        1: ("metadata", "message", OBJECT_META),
        2: ("data", "map_bytes", None),
        3: ("type", "string", None),
        4: ("stringData", "map_string", None),
        5: ("immutable", "bool", None),
    },
    "ConfigMap": {
        1: ("metadata", "message", OBJECT_META),
        2: ("data", "map_string", None),
        3: ("binaryData", "map_bytes", None),
        4: ("immutable", "bool", None),
    },
    "ServiceAccount": {
        1: ("metadata", "message", OBJECT_META),
        2: ("secrets", "repeated_message", OBJECT_REF),
        3: ("imagePullSecrets", "repeated_message", NAME_REF),
        4: ("automountServiceAccountToken", "bool", None),
    },
    "TokenRequest": {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            {
                1: ("audiences", "repeated_string", None),
                3: ("boundObjectRef", "message", BOUND_OBJECT_REF),
                4: ("expirationSeconds", "int", None),
            },
        ),
    },
    "SelfSubjectAccessReview": {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            {
                1: ("resourceAttributes", "message", RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", "message", NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    "SelfSubjectRulesReview": {
        1: ("metadata", "message", OBJECT_META),
        2: ("spec", "message", {1: ("namespace", "string", None)}),
    },
    "SelfSubjectReview": {1: ("metadata", "message", OBJECT_META)},
}
POLICY_RULE: Schema = {
    1: ("verbs", "repeated_string", None),
    2: ("apiGroups", "repeated_string", None),
    3: ("resources", "repeated_string", None),
    4: ("resourceNames", "repeated_string", None),
    5: ("nonResourceURLs", "repeated_string", None),
}
SUBJECT: Schema = {
    1: ("kind", "string", None),
    2: ("apiGroup", "string", None),
    3: ("name", "string", None),
    4: ("namespace", "string", None),
}
ROLE_REF: Schema = {
    1: ("apiGroup", "string", None),
    2: ("kind", "string", None),
    3: ("name", "string", None),
}
ROLE: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("rules", "repeated_message", POLICY_RULE),
}
BINDING: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("subjects", "repeated_message", SUBJECT),
    3: ("roleRef", "message", ROLE_REF),
}
KINDS.update(Role=ROLE, ClusterRole=ROLE, RoleBinding=BINDING, ClusterRoleBinding=BINDING)
# kubectl certificate approve|deny PUTs the whole CertificateSigningRequest to /approval.
CSR_CONDITION: Schema = {
    1: ("type", "string", None),
    2: ("reason", "string", None),
    3: ("message", "string", None),
    4: ("lastUpdateTime", "time", None),
    5: ("lastTransitionTime", "time", None),
    6: ("status", "string", None),
}
KINDS["CertificateSigningRequest"] = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {
            1: ("request", "bytes", None),
            2: ("username", "string", None),
            3: ("uid", "string", None),
            4: ("groups", "repeated_string", None),
            5: ("usages", "repeated_string", None),
            7: ("signerName", "string", None),
            8: ("expirationSeconds", "int", None),
        },
    ),
    3: (
        "status",
        "message",
        {
            1: ("conditions", "repeated_message", CSR_CONDITION),
            2: ("certificate", "bytes", None),
        },
    ),
}

TYPE_META: Schema = {1: ("apiVersion", "string", None), 2: ("kind", "string", None)}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(buf, pos)
            out.append((number, buf[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _entry(raw: bytes) -> tuple[str, bytes]:
    key, value = "", b""
    for n, v in _fields(raw):
        if n == 1 and isinstance(v, bytes):
            key = v.decode()
        elif n == 2 and isinstance(v, bytes):
            value = v
    return key, value


def decode_message(buf: bytes, schema: Schema) -> Obj:
    out: Obj = {}
    for number, value in _fields(buf):
        spec = schema.get(number)
        if spec is None:
            continue
        name, kind, sub = spec
        if kind == "string" and isinstance(value, bytes):
            # Go writes empty strings on the wire but omits them from JSON (omitempty).
            if value:
                out[name] = value.decode()
        elif kind == "int" and isinstance(value, int):
            out[name] = value
        elif kind == "bool" and isinstance(value, int):
            out[name] = bool(value)
        elif kind == "bytes" and isinstance(value, bytes):
            out[name] = base64.b64encode(value).decode()
        elif kind == "message" and isinstance(value, bytes):
            out[name] = decode_message(value, sub)
        elif kind == "time" and isinstance(value, bytes):
            seconds = decode_message(value, TIME).get("seconds", 0)
            out[name] = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind == "repeated_string" and isinstance(value, bytes):
            out.setdefault(name, []).append(value.decode())
        elif kind == "repeated_message" and isinstance(value, bytes):
            out.setdefault(name, []).append(decode_message(value, sub))
        elif kind == "map_string" and isinstance(value, bytes):
            k, v = _entry(value)
            out.setdefault(name, {})[k] = v.decode()
        elif kind == "map_bytes" and isinstance(value, bytes):
            k, v = _entry(value)
            out.setdefault(name, {})[k] = base64.b64encode(v).decode()
    return out


def decode(body: bytes) -> Obj:
    """A JSON-shaped object from a protobuf request body; 415 for kinds not described here."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "BadRequest", message="protobuf body does not start with the k8s magic")
    try:
        envelope = _fields(body[len(MAGIC) :])
        type_meta: Obj = {}
        raw = b""
        for number, value in envelope:
            if number == 1 and isinstance(value, bytes):
                type_meta = decode_message(value, TYPE_META)
            elif number == 2 and isinstance(value, bytes):
                raw = value
        kind = str(type_meta.get("kind", ""))
        schema = KINDS.get(kind)
        if schema is None:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                message=f"the emulator cannot decode protobuf for kind {kind!r}; send JSON",
            )
        obj = decode_message(raw, schema)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "BadRequest", message=f"unable to decode protobuf body: {exc}") from exc
    obj["apiVersion"] = type_meta.get("apiVersion", "")
    obj["kind"] = kind
    return obj
