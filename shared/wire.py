"""Decoding what arrives from outside the process: one place caps its size and depth.

Every JSON body from the Actions service or the Kubernetes API server, every watch event and
every config file goes through `decode_json`; a response body is read through `read_capped`.
Whatever the input (nested 100,000 deep, gigabytes long, invalid UTF-8, `NaN`, numbers of
thousands of digits), they either answer a value or raise `DecodeError` (`TooLarge` for size),
whose message says what was wrong and where, never quoting the input. Each boundary maps that
onto its own vocabulary (`shared.actions.errors`, `shared.kube.errors`, a config error).

The parser is pydantic-core's (the one pydantic validates JSON with, already loaded in both
processes): it is written in Rust, so depth cannot exhaust Python's stack; it stops at
`MAX_DEPTH` nested arrays and objects, refuses `NaN` and `Infinity` (not JSON), invalid UTF-8
and lone surrogates, and integers of more than 4,300 digits (Python's own limit on converting
text to int). A duplicate key keeps its last value, as `json.loads` does. The caps and their
reasons are in docs/security.md, "Bad input".
"""

from __future__ import annotations

from typing import Any

import aiohttp
from pydantic_core import from_json

MAX_DEPTH = 200
"""pydantic-core's fixed nesting limit. Kubernetes objects nest about 15 deep (a pod template
in a runner set), Actions messages about 5."""

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
        return from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        # pydantic-core's messages name a position ("recursion limit exceeded at line 1
        # column 202"), never the input.
        raise DecodeError(f"{what} is not valid JSON: {exc}", str(exc)) from None


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
