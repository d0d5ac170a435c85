"""An AutoscalingRunnerSet joins and leaves a listener group through its annotation
(docs/autoscaling.md#listener-groups), with all four reconcilers running: its listener is made
again with the group's name on it, its own pod, ServiceAccount and Role go for the group's, and
back again when the annotation goes."""

from __future__ import annotations

import pytest

from controller.autoscalinglistener.group import Group
from shared.api.names import ANNOTATION_LISTENER_GROUP
from shared.kube.errors import NotFound
from shared.kube.objects import POD, ROLE, Kind
from tests.controller.autoscaling import ALL, converged, create_ars, listener_of, patch_ars
from tests.controller.conftest import Rig, RigOptions


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


async def exists(rig: Rig, kind: Kind, namespace: str, name: str) -> bool:
    try:
        await rig.objects.get(kind, namespace, name)
    except NotFound:
        return False
    return True


async def test_the_annotation_moves_the_set_into_its_group_and_out_again(rig: Rig) -> None:
    await create_ars(rig)
    _, _, own = await converged(rig)
    own_name = own["metadata"]["name"]
    group = Group(namespace=rig.namespace, name="linux", home=rig.system_namespace).object_name
    await rig.until(lambda: exists(rig, POD, rig.system_namespace, own_name), what="own pod")

    await patch_ars(rig, {"metadata": {"annotations": {ANNOTATION_LISTENER_GROUP: "linux"}}})

    async def grouped() -> bool:
        listener = await listener_of(rig)
        return (
            listener is not None
            and listener["metadata"].get("annotations", {}).get(ANNOTATION_LISTENER_GROUP)
            == "linux"
            and await exists(rig, POD, rig.system_namespace, group)
            and await exists(rig, ROLE, rig.namespace, group)
            and not await exists(rig, POD, rig.system_namespace, own_name)
            and not await exists(rig, ROLE, rig.namespace, own_name)
        )

    await rig.until(grouped, what="the set served by its group's pod only")

    await patch_ars(rig, {"metadata": {"annotations": {ANNOTATION_LISTENER_GROUP: None}}})

    async def alone() -> bool:
        listener = await listener_of(rig)
        return (
            listener is not None
            and ANNOTATION_LISTENER_GROUP not in (listener["metadata"].get("annotations") or {})
            and await exists(rig, POD, rig.system_namespace, own_name)
            and not await exists(rig, POD, rig.system_namespace, group)
            and not await exists(rig, ROLE, rig.namespace, group)
        )

    await rig.until(alone, what="the set back on a pod of its own, the group's objects gone")
