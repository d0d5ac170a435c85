"""Listener standby (docs/autoscaling.md#listener-standby): with `listenerReplicas` above 1 the
AutoscalingListener reconciler makes the Lease, grants the listener get and update on it, names
it in the config and runs one pod per replica; each pod is handled on its own, and scaling down
or deleting the listener removes the extra pods and the Lease. Both in-cluster reconcilers run
against the Kubernetes emulator without a kubelet: the tests write the pods' status."""

from __future__ import annotations

import pytest

from controller.settings import ConfigError, in_cluster_settings_from_environment
from sandbox.kube.faults import Request
from shared.api import InvalidResourceError, parse_resource
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.kube.errors import Invalid
from shared.kube.objects import EVENT, LEASE, POD, ROLE, SECRET
from shared.listenerconfig import ListenerSettings as ListenerConfig
from shared.typedefs import JSONDict
from tests.controller.autoscaling import ars_body, converged, create_ars, listener_of, patch_ars
from tests.controller.autoscalinglistener.test_reconciler import (
    NAME,
    config_of,
    create_listener,
    get,
    listener_body,
)
from tests.controller.conftest import IN_CLUSTER, LISTENER_IMAGE, Rig, RigOptions

LEASE_RULE = {
    "apiGroups": ["coordination.k8s.io"],
    "resources": ["leases"],
    "resourceNames": [NAME],
    "verbs": ["get", "update"],
}
STANDBY_KEYS = {
    "standby_lease_name",
    "standby_lease_duration_seconds",
    "standby_renew_deadline_seconds",
    "standby_retry_period_seconds",
}


def name_of(request: Request) -> str:
    return request.path.split("?", 1)[0].rsplit("/", 1)[-1]


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("autoscalinglistener",), kubelet=False)


async def pods_named(rig: Rig, *names: str) -> dict[str, JSONDict]:
    """The listener pods once exactly `names` exist (none being deleted), by name."""

    async def probe() -> dict[str, JSONDict] | None:
        items = (await rig.objects.list(POD, rig.system_namespace))["items"]
        found = {p["metadata"]["name"]: p for p in items}
        if set(found) != set(names) or any(p["metadata"].get("deletionTimestamp") for p in items):
            return None
        return found

    pods: dict[str, JSONDict] = await rig.until(probe, what=f"exactly the pods {names}")
    return pods


async def config(rig: Rig) -> JSONDict:
    secret = await get(rig, SECRET, f"{NAME}-config")
    assert secret is not None
    return config_of(secret)


async def terminate(rig: Rig, pod: str, exit_code: int) -> None:
    await rig.objects.patch(
        POD,
        rig.system_namespace,
        pod,
        {
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "listener",
                        "ready": False,
                        "restartCount": 0,
                        "image": LISTENER_IMAGE,
                        "imageID": "",
                        "state": {"terminated": {"exitCode": exit_code}},
                    }
                ],
            }
        },
        status=True,
    )


async def test_two_replicas_get_a_lease_its_rule_its_config_key_and_two_pods(rig: Rig) -> None:
    await create_listener(rig, listenerReplicas=2)
    pods = await pods_named(rig, NAME, f"{NAME}-1")

    lease = await get(rig, LEASE, NAME, rig.namespace)
    assert lease is not None
    labels = lease["metadata"]["labels"]
    assert labels["app"] == "listener", "the listener's labels"
    assert labels["actions.github.com/scale-set-name"] == "arc"
    assert not (lease.get("spec") or {}).get("holderIdentity"), "nobody holds it yet"
    creates = [
        r.resource
        for r in rig.kube.requests.log
        if r.verb == "create"
        and (r.resource, r.namespace) in {("leases", rig.namespace), ("pods", rig.system_namespace)}
    ]
    assert creates == ["leases", "pods", "pods"], "the Lease is made before the pods"

    role = await get(rig, ROLE, NAME, rig.namespace)
    assert role is not None
    assert role["rules"][-1] == LEASE_RULE
    assert len(role["rules"]) == 4, "the three rules of a single listener stay as they are"

    made = await config(rig)
    assert made["standby_lease_name"] == NAME
    assert made["ephemeral_runner_set_namespace"] == rig.namespace, "where the Lease is"
    loaded = ListenerConfig.from_values(made)
    assert loaded.standby_lease_name == NAME
    assert (
        loaded.standby_lease_duration_seconds,
        loaded.standby_renew_deadline_seconds,
        loaded.standby_retry_period_seconds,
    ) == (15.0, 10.0, 2.0)

    first, second = pods[NAME], pods[f"{NAME}-1"]
    assert first["spec"] == second["spec"], "replicas differ in their name only"
    assert second["metadata"]["ownerReferences"][0]["name"] == NAME
    assert second["spec"]["volumes"][0]["secret"]["secretName"] == f"{NAME}-config"


async def test_one_replica_is_arcs_listener(rig: Rig) -> None:
    """`listenerReplicas: 1` is the same as leaving it out: no Lease, no rule, no config key,
    one pod named as the listener, and no request about Leases at all."""
    await create_listener(rig, listenerReplicas=1)
    await pods_named(rig, NAME)
    await rig.settle()
    role = await get(rig, ROLE, NAME, rig.namespace)
    assert role is not None
    assert [rule["resources"] for rule in role["rules"]] == [
        ["ephemeralrunnersets"],
        ["ephemeralrunners"],
        ["ephemeralrunners/status"],
    ]
    assert not STANDBY_KEYS & set(await config(rig))
    assert rig.kube.requests.count(resource="leases", namespace=rig.namespace) == 0


async def test_each_replica_is_restarted_on_its_own(rig: Rig) -> None:
    """A stopped standby is made again without touching the replica that holds the session,
    and its crash loop is reported under its own name."""
    await create_listener(rig, listenerReplicas=2)
    pods = await pods_named(rig, NAME, f"{NAME}-1")
    holder = pods[NAME]["metadata"]["uid"]
    standby = pods[f"{NAME}-1"]["metadata"]["uid"]
    for _ in range(3):
        await terminate(rig, f"{NAME}-1", 1)

        async def replaced(old: str = standby) -> str | None:
            pod = await get(rig, POD, f"{NAME}-1")
            uid = None if pod is None else str(pod["metadata"]["uid"])
            return uid if uid and uid != old else None

        standby = await rig.until(replaced, what="the standby made again")
    now = await pods_named(rig, NAME, f"{NAME}-1")
    assert now[NAME]["metadata"]["uid"] == holder
    items = (await rig.objects.list(EVENT, rig.system_namespace))["items"]
    [event] = [e for e in items if e["reason"] == "ListenerCrashLooping"]
    assert event["message"].startswith(f"listener pod {NAME}-1 stopped 3 times in a row")


async def test_a_third_replica_leaves_the_first_two_running(rig: Rig) -> None:
    """Their config is the same (the Lease already exists), so only the new pod is made."""
    await create_listener(rig, listenerReplicas=2)
    before = await pods_named(rig, NAME, f"{NAME}-1")
    await rig.objects.patch(
        AUTOSCALING_LISTENER, rig.system_namespace, NAME, {"spec": {"listenerReplicas": 3}}
    )
    after = await pods_named(rig, NAME, f"{NAME}-1", f"{NAME}-2")
    for name, pod in before.items():
        assert after[name]["metadata"]["uid"] == pod["metadata"]["uid"], name


async def test_scaling_down_to_one_removes_the_standby_its_lease_and_its_rule(rig: Rig) -> None:
    await create_listener(rig, listenerReplicas=2)
    before = await pods_named(rig, NAME, f"{NAME}-1")
    await rig.objects.patch(
        AUTOSCALING_LISTENER, rig.system_namespace, NAME, {"spec": {"listenerReplicas": 1}}
    )

    async def alone() -> JSONDict | None:
        pods = await pods_named(rig, NAME)
        pod = pods[NAME]
        return pod if pod["metadata"]["uid"] != before[NAME]["metadata"]["uid"] else None

    await rig.until(alone, what="one pod, made again with the config without standby")
    assert await get(rig, LEASE, NAME, rig.namespace) is None
    role = await get(rig, ROLE, NAME, rig.namespace)
    assert role is not None
    assert LEASE_RULE not in role["rules"]
    assert not STANDBY_KEYS & set(await config(rig))
    deletes = [(r.resource, name_of(r)) for r in rig.kube.requests.log if r.verb == "delete"]
    assert deletes.index(("leases", NAME)) > deletes.index(("pods", f"{NAME}-1")), (
        "the standby pod goes first"
    )


async def test_deletion_removes_every_replica_then_the_lease(rig: Rig) -> None:
    await create_listener(rig, listenerReplicas=3)
    await pods_named(rig, NAME, f"{NAME}-1", f"{NAME}-2")
    rig.kube.requests.reset()
    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, NAME)

    async def gone() -> bool:
        return await get(rig, AUTOSCALING_LISTENER, NAME) is None

    await rig.until(gone, what="the listener gone")
    assert (await rig.objects.list(POD, rig.system_namespace))["items"] == []
    assert await get(rig, LEASE, NAME, rig.namespace) is None
    deletes = [
        (r.resource, name_of(r))
        for r in rig.kube.requests.log
        if r.verb == "delete" and r.code < 300
    ]
    pods = [i for i, (resource, _) in enumerate(deletes) if resource == "pods"]
    assert sorted(name for resource, name in deletes if resource == "pods") == [
        NAME,
        f"{NAME}-1",
        f"{NAME}-2",
    ]
    assert deletes.index(("leases", NAME)) > max(pods), "pods first, then the Lease"


@pytest.mark.parametrize("value", [0, 4, "2"])
async def test_the_api_server_refuses_a_bad_listener_replicas(rig: Rig, value: object) -> None:
    for kind, body in (
        (AUTOSCALING_RUNNER_SET, ars_body(rig, listenerReplicas=value)),
        (AUTOSCALING_LISTENER, listener_body(rig, listenerReplicas=value)),
    ):
        namespace = body["metadata"].get("namespace") or rig.namespace
        with pytest.raises(Invalid) as refused:
            await rig.objects.create(kind, namespace, body)
        assert "spec.listenerReplicas" in str(refused.value), kind.kind


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Input should be greater than or equal to 1"),
        (4, "Input should be less than or equal to 3"),
        ("2", "Input should be a valid integer"),
    ],
)
def test_the_models_name_the_field_of_a_bad_listener_replicas(value: object, message: str) -> None:
    body = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "arc", "namespace": "arc-runners"},
        "spec": {"githubConfigUrl": "https://github.com/o", "listenerReplicas": value},
    }
    with pytest.raises(InvalidResourceError) as refused:
        parse_resource(body)
    assert refused.value.problems == [("spec.listenerReplicas", message)]


@pytest.mark.parametrize("rig_options", [RigOptions(controllers=IN_CLUSTER, kubelet=False)])
async def test_the_set_gives_its_listener_replicas_in_place(rig: Rig) -> None:
    """The AutoscalingRunnerSet copies `listenerReplicas`; a change of it alone patches the
    AutoscalingListener (its pods are then judged one by one) instead of making it again."""
    await create_ars(rig, listenerReplicas=2)
    _, _, listener = await converged(rig)
    assert listener["spec"]["listenerReplicas"] == 2
    name = listener["metadata"]["name"]
    await pods_of(rig, name, f"{name}-1")

    await patch_ars(rig, {"spec": {"listenerReplicas": 3}})
    await pods_of(rig, name, f"{name}-1", f"{name}-2")
    await patch_ars(rig, {"spec": {"listenerReplicas": None}})
    await pods_of(rig, name)
    now = await listener_of(rig)
    assert now is not None
    assert "listenerReplicas" not in now["spec"]
    assert now["metadata"]["uid"] == listener["metadata"]["uid"], "patched, not made again"


@pytest.mark.parametrize("rig_options", [RigOptions(controllers=IN_CLUSTER, kubelet=False)])
async def test_a_set_without_listener_replicas_gives_none(rig: Rig) -> None:
    await create_ars(rig)
    _, _, listener = await converged(rig)
    assert "listenerReplicas" not in listener["spec"]


async def pods_of(rig: Rig, *names: str) -> None:
    async def probe() -> bool:
        items = (await rig.objects.list(POD, rig.system_namespace))["items"]
        live = {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}
        return live == set(names)

    await rig.until(probe, what=f"the listener pods {names}")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS": "20"},
            "GHA_CONTROLLER_LISTENER_STANDBY_LEASE_DURATION_SECONDS > "
            "GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS > "
            "GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS is required",
        ),
        (
            {"GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS": "0"},
            "GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS: Input should be greater than 0",
        ),
    ],
)
def test_standby_timings_the_listener_would_refuse_stop_the_controller(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as refused:
        in_cluster_settings_from_environment()
    assert str(refused.value) == message


def test_standby_timings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHA_CONTROLLER_LISTENER_STANDBY_LEASE_DURATION_SECONDS", "4")
    monkeypatch.setenv("GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS", "3")
    monkeypatch.setenv("GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS", "0.5")
    settings = in_cluster_settings_from_environment()
    assert (
        settings.listener_standby_lease_duration_seconds,
        settings.listener_standby_renew_deadline_seconds,
        settings.listener_standby_retry_period_seconds,
    ) == (4.0, 3.0, 0.5)
