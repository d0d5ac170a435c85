"""RFC 7386 merge patches: the diff is minimal and applying it gives back the target."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.kube import mergepatch
from shared.typedefs import JSONDict

scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3))
documents = st.recursive(
    st.dictionaries(st.sampled_from("abcd"), scalars, max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from("abcd"), st.one_of(scalars, inner, st.lists(scalars, max_size=2))
    ),
    max_leaves=12,
)


# The machine is shared: generation speed says nothing about the code under test.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RELAXED
@given(documents, documents)
def test_applying_the_diff_gives_the_target(before: JSONDict, after: JSONDict) -> None:
    assert mergepatch.apply(before, mergepatch.diff(before, after)) == after


@RELAXED
@given(documents)
def test_equal_documents_diff_to_nothing(doc: JSONDict) -> None:
    assert mergepatch.diff(doc, doc) == {}


@pytest.mark.parametrize(
    ("before", "after", "patch"),
    [
        ({"a": 1, "b": 2}, {"a": 1, "b": 3}, {"b": 3}),
        ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1, "y": 5}}, {"a": {"y": 5}}),
        ({"a": {"x": 1}}, {"a": {}}, {"a": {"x": None}}),
        ({"f": ["a", "b"]}, {"f": ["a"]}, {"f": ["a"]}),
        ({"a": {"x": 1}}, {"a": 7}, {"a": 7}),
        ({}, {"n": {"m": 1}}, {"n": {"m": 1}}),
    ],
)
def test_diff_names_only_what_changed(before: JSONDict, after: JSONDict, patch: JSONDict) -> None:
    assert mergepatch.diff(before, after) == patch


@pytest.mark.parametrize(
    ("patch", "main", "status"),
    [
        ({"status": {"phase": "Pending"}}, {}, {"status": {"phase": "Pending"}}),
        ({"metadata": {"finalizers": ["f"]}}, {"metadata": {"finalizers": ["f"]}}, {}),
        (
            {"metadata": {"labels": {"a": "b"}}, "status": {"ready": True}},
            {"metadata": {"labels": {"a": "b"}}},
            {"status": {"ready": True}},
        ),
        ({}, {}, {}),
    ],
)
def test_split_status_separates_the_subresource(
    patch: JSONDict, main: JSONDict, status: JSONDict
) -> None:
    assert mergepatch.split_status(patch) == (main, status)
