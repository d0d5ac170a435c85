"""The listener config's bytes as Go's encoding/json writes them
(docs/autoscaling.md#autoscalinglistener): the expected strings are what
`json.NewEncoder(&buf).Encode(v)` gives for the same values."""

from __future__ import annotations

import pytest

from controller.autoscalinglistener.objects import go_json, go_metrics


@pytest.mark.parametrize(
    ("value", "go"),
    [
        pytest.param(1.0, "1", id="integral"),
        pytest.param(-0.0, "-0", id="negative-zero"),
        pytest.param(0.005, "0.005", id="fraction"),
        pytest.param(1e16, "10000000000000000", id="large"),
        pytest.param(1e21, "1e+21", id="exponent"),
        pytest.param(1e-7, "1e-7", id="small"),
        pytest.param(1e-6, "0.000001", id="small-plain"),
        pytest.param(2.5e-8, "2.5e-8", id="small-fraction"),
        pytest.param(7, "7", id="int"),
        pytest.param(True, "true", id="bool"),
        pytest.param(None, "null", id="null"),
    ],
)
def test_numbers_and_literals(value: object, go: str) -> None:
    assert go_json(value) == go + "\n"


def test_strings_escape_as_go_does() -> None:
    """HTML characters and the two JavaScript line separators escaped, other non-ASCII kept."""
    text = "<a href='x'>&</a> é \u2028\u2029 \n\t\x01 \"\\"
    assert go_json(text) == (
        "\"\\u003ca href='x'\\u003e\\u0026\\u003c/a\\u003e é "
        '\\u2028\\u2029 \\n\\t\\u0001 \\"\\\\"\n'
    )


def test_objects_keep_their_order_and_are_compact() -> None:
    assert go_json({"b": [1, {"z": 1, "a": 2}], "a": {}}) == '{"b":[1,{"z":1,"a":2}],"a":{}}\n'


def test_metrics_marshal_as_arcs_struct() -> None:
    metrics = {
        "gauges": {},
        "histograms": {"h": {"labels": ["name"]}},
        "counters": {"b": {}, "a": {"labels": ["x"], "buckets": [1]}},
    }
    assert go_json(go_metrics(metrics)) == (
        '{"counters":{"a":{"labels":["x"]},"b":{"labels":null}},"histograms":{"h":{"labels":["name"]}}}\n'
    )
