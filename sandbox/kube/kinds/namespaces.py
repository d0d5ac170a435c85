"""The Namespace strategy: the `kubernetes` finalizer and phase Active on create, Terminating
on delete (the namespace controller empties it, then `finalized` removes it)."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


def prepare_create(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj["status"] = {"phase": "Active"}
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
        "name"
    ]


def prepare_update(new: Obj, cur: Obj) -> None:
    new.setdefault("spec", cur.get("spec", {}))


def pending(obj: Obj) -> bool:
    """A namespace whose spec.finalizers still hold it after its metadata finalizers are gone."""
    return bool((obj.get("spec") or {}).get("finalizers"))


def terminating(cur: Obj, *, now: str) -> Obj:
    """The namespace marked for deletion: deletionTimestamp and phase Terminating."""
    new = copy.deepcopy(cur)
    new["metadata"]["deletionTimestamp"] = now
    new["metadata"]["deletionGracePeriodSeconds"] = 0
    new["status"] = {"phase": "Terminating"}
    return new


def finalized(cur: Obj) -> Obj:
    """The namespace controller's last step: spec.finalizers emptied."""
    final = copy.deepcopy(cur)
    final["spec"]["finalizers"] = []
    return final
