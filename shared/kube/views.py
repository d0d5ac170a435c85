"""Reading raw Kubernetes objects: the accessors every consumer of `JSONDict`s needs.

They never raise on a missing or mistyped field: a field that is absent, or not of the type the
wire promises, reads as its empty value, so a malformed object is handled like an empty one.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import cast

from shared.typedefs import JSONDict, RawMeta


def metadata_of(obj: JSONDict) -> RawMeta:
    meta = obj.get("metadata")
    return cast(RawMeta, meta) if isinstance(meta, dict) else {}


def uid_of(obj: JSONDict) -> str:
    """The object's uid; "" when it has none (an object not from the API server)."""
    return str(metadata_of(obj).get("uid") or "")


def controller_owner(obj: JSONDict) -> JSONDict | None:
    """The ownerReference marked `controller: true` (the API server allows at most one); the
    one reader of owners in both processes."""
    for ref in metadata_of(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return cast(JSONDict, ref)
    return None


def controller_owner_uid(obj: JSONDict) -> str | None:
    """The uid of the controller ownerReference, if any."""
    ref = controller_owner(obj)
    return str(ref["uid"]) if ref is not None and ref.get("uid") else None


def status_of(obj: JSONDict) -> JSONDict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def status_int(obj: JSONDict, key: str) -> int:
    """An integer status field; 0 when it is absent or not an integer."""
    value = status_of(obj).get(key)
    return value if isinstance(value, int) else 0


def spec_int(obj: JSONDict, key: str) -> int:
    """An integer spec field; 0 when it is absent or not an integer."""
    spec = obj.get("spec")
    value = spec.get(key) if isinstance(spec, dict) else None
    return value if isinstance(value, int) else 0


def annotation_int(obj: JSONDict, key: str) -> int | None:
    """An annotation holding an integer; None when it is absent or not one."""
    value = (metadata_of(obj).get("annotations") or {}).get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_deleting(obj: JSONDict) -> bool:
    return bool(metadata_of(obj).get("deletionTimestamp"))


def created_at(obj: JSONDict) -> str:
    return str(metadata_of(obj).get("creationTimestamp") or "")


def parse_time(value: str) -> datetime:
    """A Kubernetes timestamp (RFC 3339, `Z` for UTC)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime) -> str:
    """A Kubernetes timestamp (metav1.Time: RFC 3339 to the second, in UTC with `Z`); the one
    formatter of both processes."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def secret_value(secret: JSONDict, key: str) -> str | None:
    """A Secret's value, decoded from `data` (or read from `stringData`); None when the key is
    missing or its value is not valid base64 of UTF-8 text."""
    raw = (secret.get("data") or {}).get(key)
    if isinstance(raw, str):
        try:
            return base64.b64decode(raw).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
    text = (secret.get("stringData") or {}).get(key)
    return text if isinstance(text, str) else None


def pod_ready(pod: JSONDict) -> bool:
    """The one definition of readiness: the pod's Ready condition is "True"."""
    conditions = status_of(pod).get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
