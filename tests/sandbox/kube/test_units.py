"""Tables for the pure parts: patches, selectors, schemas and the protobuf decoder."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.kube import patch, protobuf, schema
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.status import ApiError


@pytest.mark.parametrize(
    ("target", "body", "want"),
    [
        ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}, {"a": {"x": 1, "y": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, [1], [1]),
        ({"a": 1}, {"b": {"c": None}}, {"a": 1, "b": {}}),
    ],
)
def test_merge_patch(target: Any, body: Any, want: Any) -> None:
    assert patch.merge_patch(target, body) == want


@pytest.mark.parametrize(
    ("ops", "want"),
    [
        ([{"op": "add", "path": "/l/-", "value": 3}], {"a": {"b": 1}, "l": [1, 2, 3]}),
        ([{"op": "add", "path": "/l/0", "value": 0}], {"a": {"b": 1}, "l": [0, 1, 2]}),
        ([{"op": "remove", "path": "/a/b"}], {"a": {}, "l": [1, 2]}),
        ([{"op": "replace", "path": "/l/1", "value": 9}], {"a": {"b": 1}, "l": [1, 9]}),
        ([{"op": "move", "from": "/a/b", "path": "/c"}], {"a": {}, "l": [1, 2], "c": 1}),
        ([{"op": "copy", "from": "/a", "path": "/d"}], {"a": {"b": 1}, "l": [1, 2], "d": {"b": 1}}),
        ([{"op": "test", "path": "/a/b", "value": 1}], {"a": {"b": 1}, "l": [1, 2]}),
        ([{"op": "add", "path": "/a~1b", "value": 1}], {"a": {"b": 1}, "l": [1, 2], "a/b": 1}),
    ],
)
def test_json_patch(ops: list[Any], want: Any) -> None:
    doc = {"a": {"b": 1}, "l": [1, 2]}
    assert patch.json_patch(doc, ops) == want
    assert doc == {"a": {"b": 1}, "l": [1, 2]}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a/b", "value": 2}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/l/5", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
    ],
)
def test_json_patch_failures(ops: list[Any]) -> None:
    with pytest.raises(patch.PatchFailed):
        patch.json_patch({"a": {"b": 1}, "l": [1, 2]}, ops)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"op": "add"}, 400),
        ([{"op": "nope", "path": "/a"}], 400),
        ([{"op": "add", "path": 3}], 400),
        ([{"op": "copy", "from": 1, "path": "/b"}], 400),
        (["add"], 400),
        ([{"op": "test", "path": "/a", "value": 1}] * 10001, 413),
    ],
)
def test_json_patch_bad_bodies(body: Any, code: int) -> None:
    with pytest.raises(ApiError) as exc:
        patch.json_patch({"a": 1}, body)
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("target", "body", "want"),
    [
        ({"finalizers": ["a"]}, {"finalizers": ["b", "a"]}, {"finalizers": ["a", "b"]}),
        (
            {"containers": [{"name": "a", "image": "1"}]},
            {"containers": [{"name": "a", "$patch": "delete"}]},
            {"containers": []},
        ),
        (
            {"containers": [{"name": "a", "image": "1"}]},
            {"containers": [{"name": "b", "image": "2"}, {"$patch": "replace"}]},
            {"containers": [{"name": "b", "image": "2"}]},
        ),
        ({"args": ["a", "b"]}, {"args": ["c"]}, {"args": ["c"]}),
        (
            {"finalizers": ["a", "b"]},
            {"$deleteFromPrimitiveList/finalizers": ["a"]},
            {"finalizers": ["b"]},
        ),
        ({"spec": {"a": 1, "b": 2}}, {"spec": {"$patch": "replace", "c": 3}}, {"spec": {"c": 3}}),
        (
            {"ports": [{"containerPort": 80, "name": "h"}]},
            {"ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"ports": [{"containerPort": 80, "name": "h", "protocol": "TCP"}]},
        ),
        (
            {"conditions": [{"type": "Ready", "status": "False"}]},
            {
                "conditions": [{"type": "Ready", "status": "True"}],
                "$setElementOrder/conditions": [{"type": "Ready"}],
            },
            {"conditions": [{"type": "Ready", "status": "True"}]},
        ),
    ],
)
def test_strategic_merge_patch(target: Any, body: Any, want: Any) -> None:
    assert patch.strategic_merge_patch(target, body) == want


@pytest.mark.parametrize("text", ["a in b", "a (b)", "!a in (b)", "=x"])
def test_bad_label_selectors_are_400(text: str) -> None:
    with pytest.raises(ApiError) as exc:
        LabelSelector.parse(text)
    assert exc.value.code == 400


def test_field_selector_reads_nested_fields_as_strings() -> None:
    obj = {"metadata": {"name": "x"}, "spec": {"hostNetwork": True}}
    assert FieldSelector.parse("spec.hostNetwork=true,metadata.name!=y").matches(obj)
    assert not FieldSelector.parse("metadata.name==y").matches(obj)


STRUCTURAL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "opts": {
                    "type": "object",
                    "properties": {"a": {"type": "integer", "default": 3}},
                    "default": {},
                },
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"n": {"type": "string"}}},
                },
            },
        }
    },
}


@pytest.mark.parametrize(
    ("spec", "want", "dropped"),
    [
        ({"port": "http"}, {"port": "http", "opts": {"a": 3}}, []),
        ({"note": None, "x": 1}, {"note": None, "opts": {"a": 3}}, ["spec.x"]),
        (
            {"items": [{"n": "a", "z": 1}]},
            {"items": [{"n": "a"}], "opts": {"a": 3}},
            ["spec.items[0].z"],
        ),
    ],
)
def test_prune_and_default(spec: Any, want: Any, dropped: list[str]) -> None:
    seen: list[str] = []
    out = schema.prune_and_default(STRUCTURAL, {"kind": "K", "spec": spec}, dropped=seen)
    assert out == {"kind": "K", "spec": want}
    assert seen == dropped


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"port": 1.5}, "spec.port"), ({"items": [{"n": 1}]}, "spec.items[0].n")],
)
def test_validate_names_the_field(spec: Any, field: str) -> None:
    causes = schema.validate(STRUCTURAL, {"spec": spec})
    assert [c.field for c in causes] == [field]


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_protobuf_envelope_decodes_a_secret() -> None:
    meta = _field(1, b"s1") + _field(3, b"ns") + _field(11, _field(1, b"k") + _field(2, b"v"))
    secret = _field(1, meta) + _field(2, _field(1, b"a") + _field(2, b"\x00b")) + _field(3, b"t")
    envelope = (
        protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Secret")) + _field(2, secret)
    )
    assert protobuf.decode(envelope) == {
        "metadata": {"name": "s1", "namespace": "ns", "labels": {"k": "v"}},
        "data": {"a": "AGI="},
        "type": "t",
        "apiVersion": "v1",
        "kind": "Secret",
    }


def test_protobuf_of_an_unknown_kind_is_415() -> None:
    envelope = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Pod"))
    with pytest.raises(ApiError) as exc:
        protobuf.decode(envelope)
    assert exc.value.code == 415
