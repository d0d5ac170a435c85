"""Arbitrary input never breaks the emulator: every failure is an ApiError (a Status answer),
never an unexpected exception (a 500)."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sandbox.kube import KubeEmulator
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.status import ApiError
from tests.sandbox.kube.conftest import FIXTURES, GROUP, VERSION, WIDGETS

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "status",
                    "metadata",
                    "size",
                    "tags",
                    "labels",
                    "finalizers",
                    "x",
                    "op",
                    "path",
                    "value",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
patch_types = st.sampled_from(
    [
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=json_values, content_type=patch_types, status=st.booleans())
# Found by this test: a JSON patch operation without `op` was a KeyError (500), not a 400.
@example(body=[{"path": ""}], content_type="application/json-patch+json", status=False)
@example(body=[{"op": 1, "path": ""}], content_type="application/json-patch+json", status=False)
def test_any_patch_body_is_applied_or_refused_with_a_status(
    body: Any, content_type: str, status: bool
) -> None:
    async def run() -> None:
        async with KubeEmulator(kubelet=False) as kube:
            kube.apply_crds([FIXTURES / "widgets-crd.yaml"])
            kube.apply(
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Widget",
                    "metadata": {"name": "w", "namespace": "default"},
                    "spec": {"size": 1, "tags": ["a"]},
                }
            )
            rt = kube.catalog.get(GROUP, version=VERSION, plural=WIDGETS)
            assert rt is not None
            code = 0
            try:
                kube.registry.patch(
                    rt,
                    ns="default",
                    name="w",
                    content_type=content_type,
                    body=body,
                    subresource="status" if status else "",
                    field_manager="fuzz",
                )
            except ApiError as exc:
                code = exc.code
            assert code == 0 or 400 <= code < 500

    asyncio.run(run())


@given(st.text(alphabet="ab=!,() inotx", max_size=16))
def test_any_selector_text_parses_or_is_400(text: str) -> None:
    obj = {"metadata": {"name": "a", "labels": {"a": "b"}}}
    for parse in (LabelSelector.parse, FieldSelector.parse):
        code = 0
        try:
            parse(text).matches(obj)
        except ApiError as exc:
            code = exc.code
        assert code in (0, 400)
