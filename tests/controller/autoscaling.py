"""Helpers for the in-cluster tests: AutoscalingRunnerSets as users and ARC's Helm chart write
them, and reads of what the two in-cluster reconcilers made."""

from __future__ import annotations

from typing import Any

from controller.autoscalingrunnerset.objects import listener_name
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from shared.kube.errors import NotFound
from shared.typedefs import JSONDict
from tests.controller.conftest import IN_CLUSTER, Rig, RigOptions

ALL = RigOptions(
    controllers=("ephemeralrunner", "ephemeralrunnerset", *IN_CLUSTER), simulated_runners=True
)
RUNNER_TEMPLATE: JSONDict = {
    "spec": {"restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:v1"}]}
}


def ars_body(rig: Rig, name: str = "arc", **spec: Any) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": name, "namespace": rig.namespace},
        "spec": {
            "githubConfigUrl": rig.config_url,
            "githubConfigSecret": "github-secret",
            "maxRunners": 5,
            "minRunners": 0,
            "template": RUNNER_TEMPLATE,
            **spec,
        },
    }


async def create_ars(rig: Rig, name: str = "arc", **spec: Any) -> JSONDict:
    return await rig.objects.create(
        AUTOSCALING_RUNNER_SET, rig.namespace, ars_body(rig, name, **spec)
    )


async def get_ars(rig: Rig, name: str = "arc") -> JSONDict | None:
    try:
        return await rig.objects.get(AUTOSCALING_RUNNER_SET, rig.namespace, name)
    except NotFound:
        return None


async def patch_ars(rig: Rig, patch: JSONDict, name: str = "arc") -> JSONDict:
    return await rig.objects.patch(AUTOSCALING_RUNNER_SET, rig.namespace, name, patch)


async def runner_set_of(rig: Rig, name: str = "arc") -> JSONDict | None:
    try:
        return await rig.objects.get(EPHEMERAL_RUNNER_SET, rig.namespace, name)
    except NotFound:
        return None


async def listeners(rig: Rig) -> list[JSONDict]:
    items: list[JSONDict] = (await rig.objects.list(AUTOSCALING_LISTENER, rig.system_namespace))[
        "items"
    ]
    return items


async def listener_of(rig: Rig, name: str = "arc") -> JSONDict | None:
    ars = await get_ars(rig, name)
    if ars is None:
        return None
    try:
        return await rig.objects.get(AUTOSCALING_LISTENER, rig.system_namespace, listener_name(ars))
    except NotFound:
        return None


async def converged(rig: Rig, name: str = "arc") -> tuple[JSONDict, JSONDict, JSONDict]:
    """Wait until the set is Running with its runner set and listener; return all three."""

    async def probe() -> tuple[JSONDict, JSONDict, JSONDict] | None:
        ars = await get_ars(rig, name)
        runner_set = await runner_set_of(rig, name)
        listener = await listener_of(rig, name)
        if ars is None or runner_set is None or listener is None:
            return None
        if (ars.get("status") or {}).get("phase") != "Running":
            return None
        return ars, runner_set, listener

    found: tuple[JSONDict, JSONDict, JSONDict] = await rig.until(probe, what=f"{name} converged")
    return found


def annotation(obj: JSONDict | None, key: str) -> str | None:
    value = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(key)
    return None if value is None else str(value)
