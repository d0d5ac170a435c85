"""An informer that keeps only what its label selectors select (and every object of the
namespaces it keeps whole): one list-watch loop per selector, asking the server for the
selection; an object two selectors select stays until it left both."""

from __future__ import annotations

import pytest

from controller.runtime import Informer
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from tests.controller.runtime.conftest import eventually, namespace_body, runner_body
from tests.controller.runtime.test_informer import FAST, running


async def labelled(objects: Objects, ns: str, name: str, labels: dict[str, str | None]) -> None:
    await objects.patch(EPHEMERAL_RUNNER, ns, name, {"metadata": {"labels": labels}})


@pytest.mark.parametrize("fault", ["none", "410-gone"])
async def test_only_selected_objects_are_kept_until_they_leave_every_selection(
    kube: KubeEmulator, objects: Objects, ns: str, fault: str
) -> None:
    whole = f"{ns}-whole"
    kube.apply(namespace_body(whole))
    for name, labels in (
        ("a", {"a": "1"}),
        ("b", {"b": "1"}),
        ("ab", {"a": "1", "b": "1"}),
        ("none", {}),
    ):
        await objects.create(EPHEMERAL_RUNNER, ns, runner_body(name, labels=labels))
    await objects.create(EPHEMERAL_RUNNER, whole, runner_body("unlabelled"))
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    informer.select(["a", "b"], whole=[whole])

    def cached() -> set[str]:
        return {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in informer.store}

    async def holds(*names: str) -> None:
        async def check() -> bool:
            return cached() == set(names)

        await eventually(check)

    async with running(informer):
        assert cached() == {f"{ns}/a", f"{ns}/b", f"{ns}/ab", f"{whole}/unlabelled"}
        if fault == "410-gone":
            kube.faults.force_gone()
        await labelled(objects, ns, "ab", {"a": None})
        await labelled(objects, ns, "none", {"b": "1"})
        await holds(f"{ns}/a", f"{ns}/b", f"{ns}/ab", f"{ns}/none", f"{whole}/unlabelled")
        await labelled(objects, ns, "ab", {"b": None})
        await labelled(objects, ns, "a", {"a": None})
        await holds(f"{ns}/b", f"{ns}/none", f"{whole}/unlabelled")
        # In both selections now: each stream delivers its updates; the store ends on the last.
        await labelled(objects, ns, "b", {"a": "1"})
        await objects.patch(EPHEMERAL_RUNNER, ns, "b", {"metadata": {"annotations": {"n": "2"}}})
        latest = await objects.get(EPHEMERAL_RUNNER, ns, "b")

        async def newest() -> bool:
            got = informer.store.get(ns, "b")
            return got is not None and (
                got["metadata"]["resourceVersion"] == latest["metadata"]["resourceVersion"]
            )

        await eventually(newest)
    # One list per selector and one of the whole namespace, each asking for its selection.
    lists = [r.path for r in kube.requests.log if r.verb == "list" and "ephemeral" in r.path]
    assert any("labelSelector=a" in p for p in lists)
    assert any("labelSelector=b" in p for p in lists)
    assert any(f"/namespaces/{whole}/" in p and "labelSelector" not in p for p in lists)
