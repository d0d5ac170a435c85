"""The two JSON parsers of `shared.wire` give the same values and the same refusals: the
controller decodes with pydantic-core's, the listener, which does not load pydantic, with the
standard library's under the project's checks (docs/listener.md#memory). Each hostile shape is
refused by both with the same reason, never a RecursionError and never the input quoted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.wire import (
    MAX_DEPTH,
    DecodeError,
    decode_json,
    parse_with_json,
    parse_with_pydantic_core,
)

PARSERS: list[Callable[[bytes | str], Any]] = [parse_with_pydantic_core, parse_with_json]
DEEP = 100_000


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


# (input, the reason both parsers give)
HOSTILE: dict[str, tuple[bytes | str, str]] = {
    "nested arrays": (nested(DEEP), "recursion limit exceeded at line 1 column"),
    "nested objects": ('{"a":' * DEEP + "1" + "}" * DEEP, "recursion limit exceeded"),
    # pydantic-core takes arrays one deeper than objects; two past the cap, both refuse.
    "past the cap": (nested(MAX_DEPTH + 2), "recursion limit exceeded"),
    "unterminated": ("[" * DEEP, "recursion limit exceeded"),
    "invalid UTF-8": (b'{"a": "\xff\xfe"}', "invalid unicode code point"),
    "an encoded surrogate": (b'{"a": "\xed\xa0\x80"}', "invalid unicode code point"),
    "a str with a lone surrogate": ('{"a": "\ud800"}', "invalid unicode code point"),
    "NaN": ('{"a": [1, NaN]}', "expected value at line 1 column 11"),
    "Infinity": ('{"a": Infinity}', "expected value"),
    "-Infinity": ("[-Infinity]", "invalid number at line 1 column 3"),
    "huge integer": ('{"a": 1' + "0" * 5_000 + "}", "number out of range"),
    # Syntax errors: each parser words them its own way.
    "trailing data": ("[1] 2", "at line 1 column"),
    "empty": ("", "at line 1 column"),
    "a single quote": ("{'a': 1}", "at line 1 column 2"),
}


@pytest.mark.parametrize("shape", sorted(HOSTILE))
@pytest.mark.parametrize("parse", PARSERS, ids=["pydantic-core", "json"])
def test_both_parsers_refuse_each_hostile_shape_for_the_same_reason(
    parse: Callable[[bytes | str], Any], shape: str
) -> None:
    data, why = HOSTILE[shape]
    with pytest.raises(ValueError, match=why) as caught:
        parse(data)
    assert "\\x" not in str(caught.value)
    assert len(str(caught.value)) < 120


@pytest.mark.parametrize(
    "data",
    [
        nested(MAX_DEPTH),
        '{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH,
        # Brackets in strings do not nest, escaped quotes do not end a string.
        json.dumps(["[" * 1_000, '\\"{' * 500, {"k[": "]" * 300}]),
        '"\\ud83d\\ude00 and \\\\ud800"',
        '{"a": 1, "a": 2}',
        b'{"x": [1.5, -0, 1e400, true, null]}',
        b'  {"\xc3\xa9": "\xf0\x9f\x98\x80"}  ',
        "1" + "0" * 4_299,
    ],
)
@pytest.mark.parametrize("parse", PARSERS, ids=["pydantic-core", "json"])
def test_both_parsers_take_valid_json_within_the_caps(
    parse: Callable[[bytes | str], Any], data: bytes | str
) -> None:
    assert parse(data) == json.loads(data)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans())
def test_both_parsers_read_any_json_value_alike(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert parse_with_json(text) == parse_with_pydantic_core(text) == value
    assert parse_with_json(text.encode()) == value


def test_a_process_without_pydantic_decodes_with_json_and_loads_no_pydantic() -> None:
    """What the listener does: decode_json in an interpreter where pydantic was never imported
    refuses as the test process does, and leaves pydantic_core unloaded."""
    code = (
        "import json, sys\n"
        "from shared.wire import DecodeError, decode_json\n"
        "reasons = []\n"
        "for data in (b'[' * 100000, b'{\"a\": NaN}', b'{\"a\": \"\\xff\"}'):\n"
        "    try:\n"
        "        decode_json(data, limit=2**20, what='the body')\n"
        "    except DecodeError as exc:\n"
        "        reasons.append(str(exc))\n"
        "print(json.dumps([reasons, 'pydantic_core' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    reasons, loaded = json.loads(out)
    assert not loaded
    assert reasons == [
        "the body is not valid JSON: recursion limit exceeded at line 1 column 201",
        "the body is not valid JSON: expected value at line 1 column 7",
        "the body is not valid JSON: invalid unicode code point at line 1 column 8",
    ]
    with pytest.raises(DecodeError, match="expected value at line 1 column 7"):
        decode_json(b'{"a": NaN}', limit=2**20, what="the body")
