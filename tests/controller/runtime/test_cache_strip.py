"""The cache keeps neither managedFields nor kubectl's last-applied-configuration annotation,
and of the top-level fields only those its readers declared."""

from __future__ import annotations

import json

import pytest

from controller.runtime import Informer
from controller.runtime.cache import LAST_APPLIED
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import eventually, runner_body
from tests.controller.runtime.test_informer import FAST, running

MANAGED_FIELDS = [
    {
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "actions.github.com/v1alpha1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:team": {}}}},
    }
]


def applied(name: str) -> dict[str, object]:
    """A runner as `kubectl apply` leaves it: its managers and a copy of itself."""
    body = runner_body(name, labels={"team": "a"})
    body["metadata"]["annotations"] = {
        LAST_APPLIED: json.dumps(runner_body(name)),
        "kept": "yes",
    }
    body["metadata"]["managedFields"] = MANAGED_FIELDS
    return body


async def test_listed_and_watched_objects_are_stored_without_them(
    objects: Objects, ns: str
) -> None:
    await objects.create(EPHEMERAL_RUNNER, ns, applied("listed"))
    on_server = await objects.get(EPHEMERAL_RUNNER, ns, "listed")
    assert LAST_APPLIED in on_server["metadata"]["annotations"]
    assert on_server["metadata"]["managedFields"]
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    async with running(informer):
        await objects.create(EPHEMERAL_RUNNER, ns, applied("watched"))

        async def watched() -> bool:
            return informer.store.get(ns, "watched") is not None

        await eventually(watched)
        for name in ("listed", "watched"):
            stored = informer.store.get(ns, name)
            assert stored is not None
            meta = stored["metadata"]
            assert "managedFields" not in meta
            assert meta["annotations"] == {"kept": "yes"}
            assert meta["labels"] == {"team": "a"}
            assert stored["kind"] == "EphemeralRunner"


async def _stored(informer: Informer, objects: Objects, ns: str) -> JSONDict:
    """A runner with a status, listed by `informer`, as its store keeps it."""
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r"))
    await objects.patch(EPHEMERAL_RUNNER, ns, "r", {"status": {"phase": "Pending"}}, status=True)
    async with running(informer):
        stored = informer.store.get(ns, "r")
        assert stored is not None
        return stored


@pytest.mark.parametrize(
    ("declared", "kept"),
    [
        ([("status",)], {"apiVersion", "kind", "metadata", "status"}),
        ([("status",), ("spec",)], {"apiVersion", "kind", "metadata", "spec", "status"}),
        ([("status",), None], {"apiVersion", "kind", "metadata", "spec", "status"}),
        ([], {"apiVersion", "kind", "metadata", "spec", "status"}),
    ],
    ids=["one-reader", "union", "one-reads-all", "none-declared"],
)
async def test_the_store_keeps_what_its_readers_declared(
    objects: Objects, ns: str, declared: list[tuple[str, ...] | None], kept: set[str]
) -> None:
    informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=FAST)
    for fields in declared:
        informer.reads(fields)
    stored = await _stored(informer, objects, ns)
    assert set(stored) == kept
    assert stored["metadata"]["name"] == "r"
    assert stored["status"] == {"phase": "Pending"}
