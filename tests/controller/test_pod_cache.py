"""The controller's Pod cache keeps the pods' metadata and status, not their spec: the two
reconcilers that read it (EphemeralRunner and AutoscalingListener) declare that they read
nothing else (controller/runtime/cache.py, `Informer.reads`)."""

from __future__ import annotations

import pytest

from shared.kube.objects import POD
from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import Rig, RigOptions


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

    # Watching every namespace, as the default install does, the cache also holds the cluster's
    # own pods (kube-system): only the project's namespaces are checked.
    async def both_cached() -> bool:
        return {p["metadata"]["namespace"] for p in store} >= ours

    await rig.until(both_cached, what="runner and listener pods cached")
    for pod in (p for p in store if p["metadata"]["namespace"] in ours):
        assert set(pod) == {"apiVersion", "kind", "metadata", "status"}, pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"]
