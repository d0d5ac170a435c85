"""ARC objects through a real client and an API server (the emulator) holding the generated CRDs.

What the controller and listener will see: the object as the API server stores it after pruning
and validation against manifests/crds, read back with kubernetes-asyncio, loaded by the models.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client

from shared.api import EphemeralRunner, EphemeralRunnerPhase, EphemeralRunnerStatus, parse_resource
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.kube.errors import Invalid
from shared.kube.objects import Kind, Objects
from tests.shared.api.conftest import load_fixture

FIXTURES = [
    "arc-autoscalingrunnerset.yaml",
    "arc-autoscalinglistener.yaml",
    "arc-ephemeralrunnerset.yaml",
    "arc-ephemeralrunner.yaml",
]
SERVER_OWNED = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


@pytest.fixture
async def objects(kube_api: client.ApiClient, namespace: str) -> Objects:
    await client.CoreV1Api(kube_api).create_namespace(
        {"metadata": {"name": namespace}}, _request_timeout=10
    )
    return Objects(kube_api, timeout=10)


def _resource(obj: dict[str, Any]) -> Kind:
    kinds = (AUTOSCALING_RUNNER_SET, AUTOSCALING_LISTENER, EPHEMERAL_RUNNER_SET, EPHEMERAL_RUNNER)
    return next(k for k in kinds if k.kind == obj["kind"])


async def _create(objects: Objects, raw: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Create raw in namespace as a client would (no server-owned metadata), then its status."""
    body = copy.deepcopy(raw)
    status = body.pop("status", None)
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in SERVER_OWNED}
    body["metadata"]["namespace"] = namespace
    res = _resource(raw)
    stored = await objects.create(res, namespace, body)
    if status:
        stored = await objects.patch(
            res, namespace, body["metadata"]["name"], {"status": status}, status=True
        )
    return stored


@pytest.mark.parametrize("fixture", FIXTURES)
async def test_arc_object_survives_the_api_server(
    objects: Objects, namespace: str, fixture: str
) -> None:
    raw = load_fixture(fixture)
    stored = await _create(objects, raw, namespace)
    model = parse_resource(stored)
    wire = model.to_wire()
    assert wire["spec"] == raw["spec"]
    assert wire.get("status") == (raw.get("status") or None)
    assert model.metadata.labels == raw["metadata"].get("labels")
    assert model.metadata.uid == stored["metadata"]["uid"]


async def test_model_written_status_is_accepted_and_read_back(
    objects: Objects, namespace: str
) -> None:
    raw = load_fixture("arc-ephemeralrunner.yaml")
    del raw["status"]
    stored = EphemeralRunner.model_validate(await _create(objects, raw, namespace))
    assert stored.status is None

    stored.status = EphemeralRunnerStatus(phase=EphemeralRunnerPhase.OUTDATED, reason="Outdated")
    assert stored.status.to_wire() == {"phase": "Outdated", "reason": "Outdated"}
    patch = {"status": stored.status.to_wire()}
    name = stored.metadata.name
    assert name is not None
    back = EphemeralRunner.model_validate(
        await objects.patch(_resource(raw), namespace, name, patch, status=True)
    )
    assert back.is_done()
    assert back.status is not None
    assert back.status.reason == "Outdated"


@pytest.mark.parametrize(
    ("fixture", "path", "value", "field"),
    [
        ("arc-autoscalingrunnerset.yaml", ("spec", "maxRunners"), -1, "spec.maxRunners"),
        ("arc-ephemeralrunnerset.yaml", ("spec", "replicas"), -1, "spec.replicas"),
        ("arc-ephemeralrunnerset.yaml", ("spec", "patchID"), "7", "spec.patchID"),
    ],
)
async def test_api_server_rejects_what_the_models_reject(
    objects: Objects,
    namespace: str,
    fixture: str,
    path: tuple[str, str],
    value: Any,
    field: str,
) -> None:
    raw = load_fixture(fixture)
    raw[path[0]][path[1]] = value
    with pytest.raises(Invalid, match=field.replace(".", r"\.")):
        await _create(objects, raw, namespace)
