"""Label and field selectors for list, watch and deletecollection
(docs/sandbox-kube.md#queries-selectors-and-paging)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sandbox.kube.status import ApiError, bad_request

Obj = dict[str, Any]

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s+(in|notin)\s+\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_./-]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "=="):
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


class LabelSelector:
    def __init__(self, requirements: list[Requirement]) -> None:
        self.requirements = requirements

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        reqs: list[Requirement] = []
        for part in _split_top(text or ""):
            if m := _SET_RE.match(part):
                if m.group(1):
                    raise bad_request(f"unable to parse requirement: {part}")
                values = tuple(v.strip() for v in m.group(4).split(",") if v.strip())
                reqs.append(Requirement(m.group(2), m.group(3), values))
            elif m := _CMP_RE.match(part):
                reqs.append(Requirement(m.group(1), m.group(2), (m.group(3),)))
            elif m := _EXISTS_RE.match(part):
                reqs.append(Requirement(m.group(2), "notexists" if m.group(1) else "exists"))
            else:
                raise bad_request(f"unable to parse requirement: found '{part}'")
        return cls(reqs)

    def matches(self, obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def field_value(obj: Obj, path: str) -> str:
    """The string form of a field, as the apiserver's field sets render them."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


class FieldSelector:
    def __init__(self, terms: list[tuple[str, str, str]]) -> None:
        self.terms = terms

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        terms = []
        for part in (text or "").split(","):
            if not part.strip():
                continue
            m = re.match(r"^\s*([^=!\s]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
            if not m:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
            terms.append((m.group(1), m.group(2), m.group(3)))
        return cls(terms)

    def check_supported(self, supported: Any, kind: str) -> None:
        for name, _, _ in self.terms:
            if not supported(name):
                raise ApiError(
                    400,
                    "BadRequest",
                    message=f'Unable to find "{kind}" that match label selector "", field selector '
                    f'"{name}": field label not supported: {name}',
                )

    def matches(self, obj: Obj) -> bool:
        for name, op, want in self.terms:
            got = field_value(obj, name)
            if (got == want) != (op != "!="):
                return False
        return True

    def __bool__(self) -> bool:
        return bool(self.terms)
