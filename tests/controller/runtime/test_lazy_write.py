"""Lazy-copy writes on the emulator: no change sends nothing; changes go out as at most one
merge patch for the object and one for /status, and the server ends up with the edited object."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.runtime import LazyObject
from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.errors import Conflict
from shared.kube.objects import Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import runner_body


@pytest.fixture
async def runner(objects: Objects, ns: str) -> JSONDict:
    body = runner_body("r", labels={"keep": "1", "drop": "1"})
    await objects.create(EPHEMERAL_RUNNER, ns, body)
    return await objects.patch(
        EPHEMERAL_RUNNER, ns, "r", {"status": {"phase": "Pending", "message": "m"}}, status=True
    )


def no_edit(obj: JSONDict) -> None:
    obj["status"]["phase"] = "Pending"


def status_only(obj: JSONDict) -> None:
    obj["status"]["phase"] = "Failed"
    del obj["status"]["message"]


def metadata_only(obj: JSONDict) -> None:
    del obj["metadata"]["labels"]["drop"]
    obj["metadata"]["finalizers"] = ["a/one", "a/two"]


def both(obj: JSONDict) -> None:
    metadata_only(obj)
    status_only(obj)


@pytest.mark.parametrize(
    ("edit", "main_patches", "status_patches"),
    [(no_edit, 0, 0), (status_only, 0, 1), (metadata_only, 1, 0), (both, 1, 1)],
)
async def test_write_sends_one_patch_per_changed_part_and_the_server_agrees(
    kube: KubeEmulator,
    objects: Objects,
    ns: str,
    runner: JSONDict,
    edit: Callable[[JSONDict], None],
    main_patches: int,
    status_patches: int,
) -> None:
    handle = LazyObject(runner, kind=EPHEMERAL_RUNNER)
    live = handle.mutate()
    edit(live)
    expected = {k: live[k] for k in ("spec", "status")}
    expected_labels = live["metadata"]["labels"]
    expected_finalizers = live["metadata"].get("finalizers")
    kube.requests.reset()
    await handle.write(objects)
    assert kube.requests.count(verb="patch", subresource="") == main_patches
    assert kube.requests.count(verb="patch", subresource="status") == status_patches
    assert kube.requests.count() == main_patches + status_patches
    server = await objects.get(EPHEMERAL_RUNNER, ns, "r")
    assert {k: server[k] for k in ("spec", "status")} == expected
    assert server["metadata"]["labels"] == expected_labels
    assert server["metadata"].get("finalizers") == expected_finalizers


async def test_a_handle_never_mutated_sends_nothing(
    kube: KubeEmulator, objects: Objects, runner: JSONDict
) -> None:
    kube.requests.reset()
    assert await LazyObject(runner, kind=EPHEMERAL_RUNNER).write(objects) is False
    assert kube.requests.count() == 0


async def test_after_a_write_the_next_mutation_diffs_against_the_server_answer(
    objects: Objects, runner: JSONDict
) -> None:
    handle = LazyObject(runner, kind=EPHEMERAL_RUNNER)
    handle.mutate()["status"]["phase"] = "Failed"
    await handle.write(objects)
    assert not handle.copied
    assert handle.object["status"]["phase"] == "Failed"
    handle.mutate()["status"]["reason"] = "TooManyFailures"
    assert handle.patch() == {"status": {"reason": "TooManyFailures"}}


async def test_an_optimistic_write_fails_on_a_concurrent_change(
    objects: Objects, ns: str, runner: JSONDict
) -> None:
    handle = LazyObject(runner, kind=EPHEMERAL_RUNNER)
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"metadata": {"labels": {"other": "x"}}})
    handle.mutate()["metadata"]["labels"]["keep"] = "2"
    with pytest.raises(Conflict):
        await handle.write(objects, optimistic=True)
