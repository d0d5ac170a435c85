"""Decoding what arrives from outside the process: one place caps its size and depth.

Every JSON body from the Actions service or the Kubernetes API server, every watch event and
every config file goes through `decode_json`; a response body is read through `read_capped`.
Whatever the input (nested 100,000 deep, gigabytes long, invalid UTF-8, `NaN`, numbers of
thousands of digits, lone surrogates), they either answer a value or raise `DecodeError`
(`TooLarge` for size), whose message says what was wrong and where, never quoting the input.
Each boundary maps that onto its own vocabulary (`shared.actions.errors`, `shared.kube.errors`, a
config error).

Two parsers give the same values and the same refusals (tests/shared/test_wire.py runs both on
one corpus), and a process chooses one, once, in its composition root (`use_parser`). The
controller's (`controller.app.compose`) chooses pydantic-core's, which pydantic validates JSON
with: written in Rust, so depth cannot exhaust Python's stack, and its string cache shares equal
keys and short values between the objects the controller's informers keep (half the memory of
`json.loads`' objects: bench/cache_bytes.py). Every other process (the listener, which leaves
pydantic out for its memory: docs/listener.md#memory) keeps the default, the standard library's
`json` with the same checks made here, so it loads nothing for it. Both stop
at `MAX_DEPTH` nested arrays and objects, refuse `NaN` and `Infinity` (not JSON), invalid UTF-8
and lone surrogates, and integers of more than 4,300 digits (Python's own limit on converting
text to int). A duplicate key keeps its last value, as `json.loads` does. The caps and their
reasons are in docs/security.md, "Bad input".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import aiohttp

MAX_DEPTH = 200
"""pydantic-core's fixed nesting limit, which the `json` path keeps too. Kubernetes objects nest
about 15 deep (a pod template in a runner set), Actions messages about 5."""

UTF8_BOM = b"\xef\xbb\xbf"


class DecodeError(ValueError):
    """The input is not acceptable JSON (or YAML); the message says why without quoting it, and
    `detail` is that reason alone."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class TooLarge(DecodeError):
    """The input is longer than the cap of the place it came to."""


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count} bytes"


def decode_json(data: bytes | str, *, limit: int, what: str) -> Any:
    """The JSON value of `data` (a leading UTF-8 byte order mark ignored), or DecodeError;
    `what` names the input in the message ("the body of GET /api/v1/pods")."""
    if len(data) > limit:
        raise TooLarge(f"{what} is {_size(len(data))}, over the cap of {_size(limit)}")
    data = data.removeprefix(UTF8_BOM) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    try:
        return _parse(data)
    except ValueError as exc:
        # Both parsers' messages name a position ("recursion limit exceeded at line 1
        # column 202"), never the input.
        raise DecodeError(f"{what} is not valid JSON: {exc}", str(exc)) from None


def use_parser(parse: Callable[[bytes | str], Any]) -> Callable[[bytes | str], Any]:
    """Make `parse` (`parse_with_json` or `parse_with_pydantic_core`) the one `decode_json` uses
    in this process, and answer the one it replaces; called once, by a composition root, before
    anything is decoded (and by the tests, which run several roots in one process)."""
    global _parse
    previous, _parse = _parse, parse
    return previous


def parse_with_pydantic_core(data: bytes | str) -> Any:
    """pydantic-core's parser (ValueError when it refuses `data`), in a process that has it."""
    from pydantic_core import from_json

    try:
        return from_json(data, allow_inf_nan=False)
    except TypeError:
        # A str holding a lone surrogate cannot be encoded for it.
        raise ValueError("invalid unicode code point") from None


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|(NaN|-?Infinity)', re.S)
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Constant(ValueError):
    """`NaN`, `Infinity` or `-Infinity`, which `json` would take."""


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


def parse_with_json(data: bytes | str) -> Any:
    """The standard library's parser with pydantic-core's refusals (ValueError, worded as
    pydantic-core words them), so that a process need not load pydantic to decode safely."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            good = data[: exc.start].decode("utf-8")
            raise ValueError(f"invalid unicode code point at {_where(good, len(good))}") from None
    else:
        text = data
        if _SURROGATE.search(text):
            raise ValueError("invalid unicode code point")
    # Only a text with more than MAX_DEPTH brackets (strings included) can nest deeper.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise ValueError(f"recursion limit exceeded at {_where(text, _too_deep_at(text))}")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except _Constant as exc:
        at = _constant_at(text)
        if str(exc).startswith("-"):
            # pydantic-core reads "-" as a number's sign: the letter after it is the error.
            raise ValueError(f"invalid number at {_where(text, at + 1)}") from None
        raise ValueError(f"expected value at {_where(text, at)}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at {_where(text, exc.pos)}") from None
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
    except ValueError:
        # int() past sys.get_int_max_str_digits(): json names the digits, not the place.
        raise ValueError("number out of range") from None
    # json joins an escaped surrogate pair into one character: what is left alone is lone.
    if _SURROGATE_ESCAPE.search(text) and _holds_surrogate(value):
        raise ValueError("invalid unicode code point: a lone surrogate")
    return value


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, strings left out (C-level loops)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def _too_deep_at(text: str) -> int:
    depth = 0
    for token in _TOKEN.finditer(text):
        step = _DEPTH_STEP.get(token.group())
        if step is not None:
            depth += step
            if depth > MAX_DEPTH:
                return token.start()
    return len(text)


def _constant_at(text: str) -> int:
    for token in _TOKEN.finditer(text):
        if token.group(1):
            return token.start()
    return 0


def _where(text: str, pos: int) -> str:
    """pydantic-core's "line L column C" of the character at `pos`, counted from 1."""
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)
    return f"line {line} column {column}"


def _holds_surrogate(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def decode_yaml(text: str, *, limit: int, what: str) -> Any:
    """The value of a YAML document (PyYAML's safe loader), or DecodeError: nesting deeper than
    the interpreter's stack allows, or anything else PyYAML refuses."""
    if len(text) > limit:
        raise TooLarge(f"{what} is {_size(len(text))}, over the cap of {_size(limit)}")
    # Imported here: PyYAML is 0.9 MB of a listener's memory (docs/listener.md#memory).
    import yaml

    try:
        return yaml.safe_load(text)
    except RecursionError:
        raise DecodeError(f"{what} is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise DecodeError(f"{what} is not valid YAML{where}") from None


def read_file_capped(path: str, *, limit: int, what: str) -> bytes:
    """The file's bytes, or TooLarge when it holds more than `limit` (only `limit` + 1 bytes
    are read); OSError as `open` raises it."""
    with open(path, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{what} is over the cap of {_size(limit)}")
    return data


async def read_capped(response: aiohttp.ClientResponse, *, limit: int, what: str) -> bytes:
    """The whole body, or TooLarge as soon as it (or its announced Content-Length) passes
    `limit`: nothing over the cap is kept in memory. The caller releases the response."""
    announced = response.content_length
    if announced is not None and announced > limit:
        raise TooLarge(f"{what} announces {_size(announced)}, over the cap of {_size(limit)}")
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise TooLarge(f"{what} is over the cap of {_size(limit)}")
    return bytes(body)


_parse: Callable[[bytes | str], Any] = parse_with_json
"""The parser `decode_json` uses (`use_parser`)."""
