"""The controller's Pod cache keeps the pods it manages, and of them the metadata and status, not
their spec: the two reconcilers that read it (EphemeralRunner and AutoscalingListener) declare
that they read nothing else (controller/runtime/cache.py, `Informer.reads`), and the composition
root selects the pods (`Informer.select`)."""

from __future__ import annotations

import pytest

from shared.api.names import LABEL_EPHEMERAL_RUNNER, LABEL_RUNNER_POD
from shared.kube.objects import POD
from shared.typedefs import JSONDict
from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


async def test_runner_and_listener_pods_are_cached_without_their_spec(rig: Rig) -> None:
    await create_ars(rig)
    await converged(rig)
    await rig.scale(1, 1)
    [runner] = await rig.registered(1)
    await rig.until(lambda: rig.pod(runner["metadata"]["name"]), what="runner pod")
    store = rig.manager.informer(POD).store

    ours = {rig.namespace, rig.system_namespace}

    async def both_cached() -> bool:
        return {p["metadata"]["namespace"] for p in store} >= ours

    await rig.until(both_cached, what="runner and listener pods cached")
    for pod in store:
        assert set(pod) == {"apiVersion", "kind", "metadata", "status"}, pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"]


def pod_body(name: str, labels: dict[str, str]) -> JSONDict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "app:v1"}]},
    }


async def test_only_the_pods_the_controller_manages_are_cached(rig: Rig) -> None:
    """The Pod informer asks the server for runner pods (this controller's and ARC's both carry
    `actions-ephemeral-runner`), container-hook pods (`runner-pod`) and every pod of the
    listeners' namespace; a tenant's other pods never reach the controller (controller/app.py,
    `select_pods`)."""
    await create_ars(rig)
    await converged(rig)
    await rig.scale(1, 1)
    [runner] = await rig.registered(1)
    name = runner["metadata"]["name"]
    await rig.until(lambda: rig.pod(name), what="runner pod")
    for pod in (
        pod_body("unrelated", {"app": "web"}),
        pod_body("arc-made", {LABEL_EPHEMERAL_RUNNER: "True"}),
        pod_body("hook-made", {LABEL_RUNNER_POD: name}),
    ):
        await rig.objects.create(POD, rig.namespace, pod)
    await rig.objects.create(POD, rig.system_namespace, pod_body("beside-listeners", {}))
    store = rig.manager.informer(POD).store
    listener_pods = {
        p["metadata"]["name"] for p in (await rig.objects.list(POD, rig.system_namespace))["items"]
    }
    want = {
        *((rig.namespace, n) for n in (name, "arc-made", "hook-made")),
        *((rig.system_namespace, n) for n in listener_pods),
    }

    async def cached() -> bool:
        return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in store} == want

    await rig.until(cached, what=f"exactly {sorted(want)} cached")
    # Every list and watch of pods the controller sent asked for a selection or one namespace.
    for request in rig.kube.requests.log:
        if (request.user, request.resource) == (CONTROLLER_USER, "pods") and request.verb in (
            "list",
            "watch",
        ):
            assert "labelSelector=" in request.path or request.namespace, request.path
