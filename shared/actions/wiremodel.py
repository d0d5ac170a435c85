"""Dataclasses read from the Actions service's JSON, without pydantic.

The listener decodes every long-poll answer with these, and leaves pydantic out of its import for
its memory (about 12 MB: docs/listener.md#memory); the controller uses the same classes. Each
field names its wire key (`metadata=wire("runnerRequestId")`); `from_wire` converts a decoded
JSON object as pydantic's lax mode did for these fields (an integer from a whole float or a
numeric string, a boolean from 0, 1 or "true"...), ignores unknown keys, gives each missing key
its default, and raises `WireError` naming the wrong key, never its value.
"""

from __future__ import annotations

import dataclasses
import re
import types
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Self, Union, get_args, get_origin, get_type_hints

_INTEGER = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class WireError(ValueError):
    """The JSON does not fit the model; `problems` name each wrong key and why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class SecretStr:
    """A token or JIT config: masked in repr, str and `to_wire`; `get_secret_value()` reads it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretStr) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __repr__(self) -> str:
        return f"SecretStr('{self}')"


def wire(name: str | None, *, zero_time_is_none: bool = False) -> dict[str, Any]:
    """The metadata of a field read from and written to the JSON key `name` (None: not on the
    wire), `field(default=0, metadata=wire("runnerId"))`. With `zero_time_is_none`, Go's zero
    time, `""` and `null` are None ("not set")."""
    return {"wire": name, "zero_time_is_none": zero_time_is_none}


class _Bad(Exception):
    def __init__(self, path: str, why: str) -> None:
        self.path = path
        self.why = why


@dataclasses.dataclass
class WireModel:
    """A JSON object of the Actions service (subclasses are dataclasses)."""

    numbers_to_str: ClassVar[bool] = False
    """Whether a string field takes a JSON number (the job messages' `jobId`)."""

    @classmethod
    def from_wire(cls, data: object) -> Self:
        """The model of a decoded JSON object, or WireError."""
        try:
            return cls._read(data, "")
        except _Bad as bad:
            raise WireError([f"{bad.path or 'the value'}: {bad.why}"]) from None

    @classmethod
    def _read(cls, data: object, path: str) -> Self:
        if not isinstance(data, dict):
            raise _Bad(path, "expected an object")
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            key = field.metadata.get("wire", field.name)
            if key is None:
                continue
            where = f"{path}.{key}" if path else key
            if key not in data:
                if field.default is dataclasses.MISSING is field.default_factory:
                    raise _Bad(where, "is required")
                continue
            if field.metadata.get("zero_time_is_none") and _unset_time(data[key]):
                values[field.name] = None
            else:
                values[field.name] = _convert(hints[field.name], data[key], where, cls)
        return cls(**values)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object, wire names, secrets masked (as pydantic's dump masked them)."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            key = field.metadata.get("wire", field.name)
            if key is not None:
                out[key] = _dump(getattr(self, field.name))
        return out


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _unset_time(value: object) -> bool:
    return value in (None, "") or (isinstance(value, str) and value.startswith("0001-01-01"))


def _convert(kind: Any, value: object, path: str, owner: type[WireModel]) -> Any:
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(kind):
            return None
        (kind,) = [arg for arg in get_args(kind) if arg is not type(None)]
        origin = get_origin(kind)
    if origin is list:
        if not isinstance(value, list):
            raise _Bad(path, "expected an array")
        (item,) = get_args(kind)
        return [_convert(item, element, f"{path}[{i}]", owner) for i, element in enumerate(value)]
    if origin is Literal:
        if value not in get_args(kind):
            raise _Bad(path, f"expected one of {', '.join(map(repr, get_args(kind)))}")
        return value
    if isinstance(kind, type) and issubclass(kind, WireModel):
        return kind._read(value, path)
    reader = _SCALARS.get(kind)
    if reader is None:
        raise TypeError(f"{owner.__name__}: no reader for {kind!r}")
    return reader(value, path, owner)


def _int(value: object, path: str, owner: type[WireModel]) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()) and len(value) <= 4300:
        return int(value)
    raise _Bad(path, "expected an integer")


def _str(value: object, path: str, owner: type[WireModel]) -> str:
    if isinstance(value, str):
        return value
    if owner.numbers_to_str and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _Bad(path, "expected a string")


def _bool(value: object, path: str, owner: type[WireModel]) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1) and isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Bad(path, "expected a boolean")


def _time(value: object, path: str, owner: type[WireModel]) -> datetime:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    raise _Bad(path, "expected an RFC 3339 time")


def _secret(value: object, path: str, owner: type[WireModel]) -> SecretStr:
    return SecretStr(_str(value, path, owner))


_SCALARS: dict[Any, Any] = {
    int: _int,
    str: _str,
    bool: _bool,
    datetime: _time,
    SecretStr: _secret,
}


def _dump(value: object) -> Any:
    if isinstance(value, WireModel):
        return value.to_wire()
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if isinstance(value, SecretStr):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value
