"""An AutoscalingRunnerSet's `scalingPolicy` reaches its listener: the AutoscalingRunnerSet
reconciler copies it into the AutoscalingListener, whose reconciler writes it into the config
Secret as `scaling_policy`, which the listener reads (docs/policies.md). Both in-cluster
reconcilers run against the Kubernetes emulator, without a kubelet."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from listener.config import ListenerSettings
from listener.scaler import Scaler
from shared.api.kinds import AUTOSCALING_RUNNER_SET
from shared.kube.errors import Invalid, NotFound
from shared.kube.objects import EVENT, SECRET
from shared.policy import ScalingPolicy
from shared.typedefs import JSONDict
from tests.controller.autoscaling import (
    ars_body,
    converged,
    create_ars,
    get_ars,
    listener_of,
    patch_ars,
)
from tests.controller.conftest import IN_CLUSTER, Rig, RigOptions

ALWAYS_OPEN = {"cron": "* * * * *", "duration": "1h", "timeZone": "Europe/Berlin"}


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=IN_CLUSTER, kubelet=False)


async def listener_config(rig: Rig, listener: JSONDict) -> JSONDict | None:
    try:
        secret = await rig.objects.get(
            SECRET, rig.system_namespace, f"{listener['metadata']['name']}-config"
        )
    except NotFound:
        return None
    loaded: JSONDict = json.loads(base64.b64decode(secret["data"]["config.json"]))
    return loaded


async def config_when(rig: Rig, wanted: Any) -> JSONDict:
    """The listener's config once its `scaling_policy` is `wanted` (None: absent)."""

    async def probe() -> JSONDict | None:
        listener = await listener_of(rig)
        config = None if listener is None else await listener_config(rig, listener)
        if config is None or config.get("scaling_policy") != wanted:
            return None
        return config

    found: JSONDict = await rig.until(probe, what=f"config with scaling_policy {wanted}")
    return found


def scaler_of(config: JSONDict) -> Scaler:
    """The Scaler the listener builds from this config (listener/service.py)."""
    settings = ListenerSettings(**config)
    return Scaler(
        min_runners=settings.min_runners,
        max_runners=settings.max_runners,
        policy=settings.scaling_policy,
    )


@pytest.mark.parametrize(
    ("policy", "assigned", "replicas"),
    [
        pytest.param({"minIdle": 1}, [0, 3], [2, 4], id="min-idle"),
        pytest.param(
            {"schedules": [{**ALWAYS_OPEN, "minRunners": 3, "minIdle": 4}]},
            [0, 3],
            [4, 7],
            id="schedule",
        ),
        pytest.param(
            {"burst": {"threshold": 0, "extraPercent": 100, "maxExtra": 1}},
            [0, 3],
            [2, 6],
            id="burst",
        ),
        pytest.param(
            {"burst": {"threshold": 0, "maxExtra": 1}, "warmTailSeconds": 3600},
            [0, 3, 0],
            [2, 6, 6],
            id="warm-tail",
        ),
        pytest.param({"scaleDownDelaySeconds": 3600}, [0, 3, 0], [2, 5, 5], id="scale-down-delay"),
    ],
)
async def test_the_policy_reaches_the_listeners_config(
    rig: Rig, policy: JSONDict, assigned: list[int], replicas: list[int]
) -> None:
    """ARC's formula would ask for 2 and 5 (minRunners 2 + 3 jobs), and 2 after the jobs."""
    await create_ars(rig, minRunners=2, maxRunners=10, scalingPolicy=policy)
    _, _, listener = await converged(rig)
    assert listener["spec"]["scalingPolicy"] == policy
    config = await config_when(rig, policy)
    assert ListenerSettings(**config).scaling_policy == ScalingPolicy.model_validate(policy)
    scaler = scaler_of(config)
    assert [scaler.desired(jobs).replicas for jobs in assigned] == replicas


async def test_a_set_without_a_policy_gets_arcs_config(rig: Rig) -> None:
    await create_ars(rig)
    _, _, listener = await converged(rig)
    assert "scalingPolicy" not in listener["spec"]
    config = await config_when(rig, None)
    assert "scaling_policy" not in config


async def test_a_changed_policy_makes_the_listener_again_with_it(rig: Rig) -> None:
    await create_ars(rig, scalingPolicy={"minIdle": 1})
    _, _, first = await converged(rig)
    await config_when(rig, {"minIdle": 1})
    await patch_ars(rig, {"spec": {"scalingPolicy": {"minIdle": 2}}})
    await config_when(rig, {"minIdle": 2})
    listener = await listener_of(rig)
    assert listener is not None
    assert listener["metadata"]["uid"] != first["metadata"]["uid"]


async def test_the_api_server_refuses_a_policy_of_the_wrong_shape(rig: Rig) -> None:
    """The CRD's schema: a field path in the API server's answer, before any reconciler runs."""
    body = ars_body(rig, scalingPolicy={"minIdle": "two"})
    with pytest.raises(Invalid) as refused:
        await rig.objects.create(AUTOSCALING_RUNNER_SET, rig.namespace, body)
    assert "spec.scalingPolicy.minIdle" in str(refused.value)


def policy_condition(ars: JSONDict | None) -> JSONDict | None:
    for condition in ((ars or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "ScalingPolicyValid":
            found: JSONDict = condition
            return found
    return None


async def test_a_policy_the_listener_would_refuse_is_reported_on_the_set(rig: Rig) -> None:
    """Cron, time zone and bounds are beyond the CRD's schema: the reconciler checks them, says
    what to fix in a condition and an Event, and makes no listener that would exit 2; the fixed
    policy brings the listener."""
    policy = {"schedules": [{**ALWAYS_OPEN, "timeZone": "Europe/Berln", "minIdle": 9}]}
    await create_ars(rig, maxRunners=5, scalingPolicy=policy)

    async def refused() -> JSONDict | None:
        return policy_condition(await get_ars(rig))

    condition = await rig.until(refused, what="ScalingPolicyValid condition")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "InvalidScalingPolicy",
        'spec.scalingPolicy.schedules[0].timeZone: unknown time zone "Europe/Berln" (an IANA '
        'name such as "Europe/Berlin" or "UTC")',
    )
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    assert [e["reason"] for e in events] == ["InvalidScalingPolicy"]
    assert await listener_of(rig) is None

    await patch_ars(
        rig, {"spec": {"scalingPolicy": {"schedules": [{**ALWAYS_OPEN, "minIdle": 9}]}}}
    )
    bound = "spec.scalingPolicy.schedules[0].minIdle must not be greater than maxRunners (9 > 5)"

    async def bound_reported() -> bool:
        return (policy_condition(await get_ars(rig)) or {}).get("message") == bound

    await rig.until(bound_reported, what="the bound problem reported")
    assert await listener_of(rig) is None
    await patch_ars(
        rig, {"spec": {"scalingPolicy": {"schedules": [{**ALWAYS_OPEN, "minIdle": 2}]}}}
    )
    await converged(rig)

    async def valid() -> bool:
        return (policy_condition(await get_ars(rig)) or {}).get("status") == "True"

    await rig.until(valid, what="ScalingPolicyValid=True")
