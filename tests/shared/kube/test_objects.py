"""The generic object client on the wire: plain dicts for core and custom kinds, merge patches,
mapped errors."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.errors import Conflict, NotFound, Timeout
from shared.kube.objects import CONFIG_MAP, POD, Objects
from tests.controller.runtime.conftest import runner_body


async def test_core_and_custom_objects_round_trip_as_dicts(objects: Objects, ns: str) -> None:
    created = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r1"))
    assert isinstance(created, dict)
    assert created["metadata"]["uid"]
    got = await objects.get(EPHEMERAL_RUNNER, ns, "r1")
    assert got["spec"]["runnerScaleSetId"] == 1
    await objects.create(CONFIG_MAP, ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    listing = await objects.list(CONFIG_MAP, ns)
    assert "c" in [i["metadata"]["name"] for i in listing["items"]]
    assert listing["metadata"]["resourceVersion"]


async def test_merge_patch_replaces_a_pod_finalizer_list(objects: Objects, ns: str) -> None:
    pod = {
        "metadata": {"name": "p", "finalizers": ["a/one", "a/two"]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    await objects.create(POD, ns, pod)
    patched = await objects.patch(POD, ns, "p", {"metadata": {"finalizers": ["a/two"]}})
    assert patched["metadata"]["finalizers"] == ["a/two"]


async def test_status_patch_goes_to_the_subresource(objects: Objects, ns: str) -> None:
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r1"))
    patched = await objects.patch(
        EPHEMERAL_RUNNER, ns, "r1", {"status": {"phase": "Pending"}}, status=True
    )
    assert patched["status"]["phase"] == "Pending"


async def test_errors_are_mapped(objects: Objects, ns: str) -> None:
    with pytest.raises(NotFound):
        await objects.get(EPHEMERAL_RUNNER, ns, "missing")
    created = await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r1"))
    await objects.patch(EPHEMERAL_RUNNER, ns, "r1", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(Conflict):
        await objects.replace(EPHEMERAL_RUNNER, ns, created)


@pytest.mark.parametrize("verb", ["get", "list", "patch"])
async def test_a_request_the_server_holds_times_out(
    kube: KubeEmulator, kube_api: client.ApiClient, ns: str, verb: str
) -> None:
    objects = Objects(kube_api, timeout=0.3)
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r1"))
    kube.faults.latency(2.0, verb=verb)
    calls = {
        "get": lambda: objects.get(EPHEMERAL_RUNNER, ns, "r1"),
        "list": lambda: objects.list(EPHEMERAL_RUNNER, ns),
        "patch": lambda: objects.patch(EPHEMERAL_RUNNER, ns, "r1", {"metadata": {"labels": {}}}),
    }
    with pytest.raises(Timeout):
        await calls[verb]()


async def test_the_observer_sees_each_request_with_its_answer(
    kube: KubeEmulator, kube_api: client.ApiClient, ns: str
) -> None:
    seen: list[tuple[str, str]] = []
    objects = Objects(kube_api, timeout=0.3, observer=lambda m, c: seen.append((m, c)))
    await objects.create(EPHEMERAL_RUNNER, ns, runner_body("r1"))
    with pytest.raises(NotFound):
        await objects.get(EPHEMERAL_RUNNER, ns, "missing")
    kube.faults.latency(2.0, verb="get")
    with pytest.raises(Timeout):
        await objects.get(EPHEMERAL_RUNNER, ns, "r1")
    assert seen == [("POST", "201"), ("GET", "404"), ("GET", "<error>")]
