"""The Secret strategy: `stringData` folded into base64 `data`, type `Opaque` by default."""

from __future__ import annotations

import base64
from typing import Any

Obj = dict[str, Any]


def prepare_create(obj: Obj) -> None:
    fold_string_data(obj)
    obj.setdefault("type", "Opaque")


def prepare_update(new: Obj, cur: Obj) -> None:
    fold_string_data(new)
    new.setdefault("type", cur.get("type", "Opaque"))


def fold_string_data(obj: Obj) -> None:
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {}) or {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data
