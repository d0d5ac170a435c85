"""The cache keeps neither managedFields nor kubectl's last-applied-configuration annotation."""

from __future__ import annotations

import asyncio
import contextlib
import json

from controller.runtime import Informer
from controller.runtime.cache import LAST_APPLIED
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from tests.controller.runtime.conftest import eventually, runner_body
from tests.controller.runtime.test_informer import FAST

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
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 10)
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
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
