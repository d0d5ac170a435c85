"""Server-side apply's field ownership, without conflicts: per object, per field manager, the
leaf paths it applied, so a field a manager stops applying is removed unless another applies it.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

_IDENTITY = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}


class AppliedFields:
    def __init__(self) -> None:
        # Per object uid, per field manager, the leaf paths it applied.
        self.owners: dict[str, dict[str, set[tuple[str, ...]]]] = {}

    def unapplied(self, cur: Obj, *, manager: str, body: Obj) -> Obj:
        """The object without the fields `manager` applied last time and applies no more,
        unless another applier also set them (server-side apply's field ownership, without
        conflicts)."""
        owners = self.owners.get(cur["metadata"]["uid"], {})
        dropped = owners.get(manager, set()) - leaf_paths(body)
        kept = set().union(*(p for m, p in owners.items() if m != manager))
        out = copy.deepcopy(cur)
        for path in sorted(dropped - kept, key=len, reverse=True):
            _remove_path(out, path)
        return out

    def record(self, obj: Obj, *, manager: str, body: Any) -> None:
        if isinstance(body, dict):
            owners = self.owners.setdefault(obj["metadata"]["uid"], {})
            owners[manager] = leaf_paths(body)

    def forget(self, uid: str) -> None:
        self.owners.pop(uid, None)


def leaf_paths(body: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Paths to the non-object values of an apply body (lists are atomic, as for CRs)."""
    if not isinstance(body, dict) or not body:
        return {prefix} if prefix and prefix not in _IDENTITY else set()
    out: set[tuple[str, ...]] = set()
    for key, value in body.items():
        out |= leaf_paths(value, (*prefix, str(key)))
    return out


def _remove_path(obj: Obj, path: tuple[str, ...]) -> None:
    cur: Any = obj
    for key in path[:-1]:
        cur = cur.get(key) if isinstance(cur, dict) else None
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
