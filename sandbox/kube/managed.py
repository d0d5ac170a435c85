"""`metadata.managedFields`: which field manager set which fields of an object, as the API server
records them (docs/sandbox-kube.md#field-managers).

Per object uid, one entry per (manager, operation, subresource), each with the leaf paths that
manager owns. A create or update gives its manager the leaf paths it added or changed and takes
them from every other manager; a removed path leaves every set; an entry left empty is dropped.
An apply owns what it applied (`sandbox.kube.apply` keeps the removal semantics). Only the
paths that changed are computed per write, and an entry's `fieldsV1` is rebuilt only when its
set changed, since every benchmark's write comes through here.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Path = tuple[str, ...]

UPDATE = "Update"
APPLY = "Apply"
MAX_MANAGER_LENGTH = 128
SANDBOX_MANAGER = "sandbox"
"""The manager of the emulator's own writes (kubelet, workload and token controllers, seeding)."""

# The field manager of the request being served: `?fieldManager=`, else the User-Agent's prefix;
# set per request by the HTTP layer (each aiohttp request runs in its own task).
FIELD_MANAGER: contextvars.ContextVar[str] = contextvars.ContextVar(
    "field_manager", default=SANDBOX_MANAGER
)

# Set by the server, never tracked: the object's identity and bookkeeping.
_UNTRACKED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    }
)


def manager_from_user_agent(user_agent: str) -> str:
    """kube-apiserver's default manager name: the User-Agent up to its first "/", at most 128
    characters (`gha-controller/0.1.0` -> `gha-controller`)."""
    return user_agent.split("/", 1)[0][:MAX_MANAGER_LENGTH]


@dataclass(slots=True)
class _Entry:
    api_version: str
    time: str
    paths: set[Path]
    fields: Obj | None = None
    """`fieldsV1` of `paths`, None until rebuilt after a change."""


@dataclass(slots=True)
class _Object:
    entries: dict[tuple[str, str, str], _Entry] = field(default_factory=dict)


class ManagedFields:
    def __init__(self) -> None:
        self._objects: dict[str, _Object] = {}

    def created(
        self,
        obj: Obj,
        *,
        manager: str,
        api_version: str,
        time: str,
        applied: set[Path] | None = None,
    ) -> None:
        """Record a create (an apply's when `applied`) and write the object's managedFields."""
        changed: set[Path] = set()
        _diff({}, _tracked(obj), (), changed, set())
        self._objects.pop(obj["metadata"]["uid"], None)
        self._write(
            obj,
            changed=changed,
            removed=set(),
            key=(manager, UPDATE if applied is None else APPLY, ""),
            api_version=api_version,
            time=time,
            applied=applied,
        )

    def updated(
        self,
        cur: Obj,
        new: Obj,
        *,
        manager: str,
        subresource: str,
        api_version: str,
        time: str,
        applied: set[Path] | None = None,
    ) -> None:
        """Record the write of `new` over `cur` and write `new`'s managedFields."""
        changed: set[Path] = set()
        removed: set[Path] = set()
        _diff(_tracked(cur), _tracked(new), (), changed, removed)
        operation = UPDATE if applied is None else APPLY
        self._write(
            new,
            changed=changed,
            removed=removed,
            key=(manager, operation, subresource),
            api_version=api_version,
            time=time,
            applied=applied,
        )

    def forget(self, uid: str) -> None:
        self._objects.pop(uid, None)

    def _write(
        self,
        obj: Obj,
        *,
        changed: set[Path],
        removed: set[Path],
        key: tuple[str, str, str],
        api_version: str,
        time: str,
        applied: set[Path] | None,
    ) -> None:
        state = self._objects.setdefault(obj["metadata"]["uid"], _Object())
        gone = changed | removed
        for other_key, entry in list(state.entries.items()):
            if other_key == key or not gone or entry.paths.isdisjoint(gone):
                continue
            entry.paths -= gone
            entry.fields = None
            if not entry.paths:
                del state.entries[other_key]
        owned = changed if applied is None else applied
        mine = state.entries.get(key)
        if mine is None:
            if owned:
                state.entries[key] = _Entry(api_version, time, set(owned))
        else:
            paths = (mine.paths - removed) | owned if applied is None else set(owned)
            if paths != mine.paths or changed or removed:
                mine.paths, mine.fields, mine.time = paths, None, time
                mine.api_version = api_version
            if not paths:
                del state.entries[key]
        if not state.entries:
            del self._objects[obj["metadata"]["uid"]]
            obj["metadata"].pop("managedFields", None)
            return
        obj["metadata"]["managedFields"] = _render(state)


def _tracked(obj: Obj) -> Obj:
    """The object without what no manager owns (apiVersion, kind, server-set metadata)."""
    meta = obj.get("metadata") or {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    tracked_meta = {k: v for k, v in meta.items() if k not in _UNTRACKED_META}
    if tracked_meta:
        out["metadata"] = tracked_meta
    return out


def _diff(old: Any, new: Any, prefix: Path, changed: set[Path], removed: set[Path]) -> None:
    """Leaf paths of `new` that differ from `old` into `changed`, leaf paths of `old` that `new`
    no longer has into `removed`. Lists are atomic; an empty object is a leaf."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict) and old and new:
        for key, value in new.items():
            _diff(old.get(key, _MISSING), value, (*prefix, key), changed, removed)
        for key, value in old.items():
            if key not in new:
                _leaves(value, (*prefix, key), removed)
        return
    # A leaf changed in place stays a changed leaf; a leaf that became an object (or the
    # reverse) is removed, and the new value's leaves are changed.
    if old is not _MISSING and prefix:
        if isinstance(old, dict) and old:
            _leaves(old, prefix, removed)
        elif isinstance(new, dict) and new:
            removed.add(prefix)
    _leaves(new, prefix, changed)


def _leaves(value: Any, prefix: Path, into: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _leaves(sub, (*prefix, key), into)
    elif prefix:
        into.add(prefix)


_MISSING: Any = object()


def _render(state: _Object) -> list[Obj]:
    """The entries as served: Apply before Update, then by time and manager, as the server
    sorts them."""
    out: list[tuple[tuple[bool, str, str], Obj]] = []
    for (manager, operation, subresource), entry in state.entries.items():
        if entry.fields is None:
            entry.fields = fields_v1(entry.paths)
        item: Obj = {
            "manager": manager,
            "operation": operation,
            "apiVersion": entry.api_version,
            "time": entry.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": entry.fields,
        }
        if subresource:
            item["subresource"] = subresource
        out.append(((operation != APPLY, entry.time, manager), item))
    out.sort(key=lambda pair: pair[0])
    return [item for _, item in out]


def fields_v1(paths: set[Path]) -> Obj:
    """The `fieldsV1` form of leaf paths: `{"f:status": {"f:phase": {}}}`."""
    root: Obj = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root
