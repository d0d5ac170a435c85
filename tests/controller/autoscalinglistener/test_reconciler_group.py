"""Listener groups (docs/autoscaling.md#listener-groups) against the Kubernetes emulator: the
AutoscalingListeners of one runner namespace naming one group share one pod, one config Secret
with a file per set, and one Role naming exactly their EphemeralRunnerSets; a set naming the
group with another GitHub config is refused, never merged. No kubelet runs: pods are objects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml

from controller.autoscalinglistener.group import Group
from controller.autoscalinglistener.objects import role_rules
from sandbox.demo.cluster import RUNNER_NAMESPACE_RBAC
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.api.names import ANNOTATION_LISTENER_GROUP, LISTENER_CONFIG_MOUNT_PATH
from shared.kube.errors import NotFound
from shared.kube.objects import EVENT, LEASE, POD, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT, Kind
from shared.typedefs import JSONDict
from tests.controller.autoscaling import ars_body, create_ars
from tests.controller.conftest import LISTENER_IMAGE, Rig, RigOptions

GROUP = "linux"


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("autoscalinglistener",), kubelet=False)


def group_name(rig: Rig, namespace: str = "") -> str:
    return Group(
        namespace=namespace or rig.namespace, name=GROUP, home=rig.system_namespace
    ).object_name


async def member(
    rig: Rig, name: str, *, group: str = GROUP, namespace: str = "", **spec: Any
) -> JSONDict:
    """An AutoscalingRunnerSet `name` (in `namespace`, the rig's by default) and its listener
    naming `group`, as the set's reconciler makes it from the set's annotation."""
    namespace = namespace or rig.namespace
    if namespace == rig.namespace:
        await create_ars(rig, name)
    else:
        body = ars_body(rig, name)
        body["metadata"]["namespace"] = namespace
        await rig.objects.create(AUTOSCALING_RUNNER_SET, namespace, body)
    body = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {
            "name": f"{name}-listener",
            "namespace": rig.system_namespace,
            "annotations": {ANNOTATION_LISTENER_GROUP: group},
        },
        "spec": {
            "githubConfigUrl": rig.config_url,
            "githubConfigSecret": "github-secret",
            "runnerScaleSetId": rig.scale_set_id,
            "autoscalingRunnerSetNamespace": namespace,
            "autoscalingRunnerSetName": name,
            "ephemeralRunnerSetName": name,
            "maxRunners": 5,
            "minRunners": 0,
            "image": LISTENER_IMAGE,
            **spec,
        },
    }
    made: JSONDict = await rig.objects.create(AUTOSCALING_LISTENER, rig.system_namespace, body)
    return made


async def get(rig: Rig, kind: Kind, namespace: str, name: str) -> JSONDict | None:
    try:
        return await rig.objects.get(kind, namespace, name)
    except NotFound:
        return None


def configs_of(secret: JSONDict) -> dict[str, JSONDict]:
    return {key: json.loads(base64.b64decode(value)) for key, value in secret["data"].items()}


async def group_config(rig: Rig, keys: set[str]) -> dict[str, JSONDict]:
    """The group's config Secret once it holds exactly the files `keys`."""

    async def probe() -> dict[str, JSONDict] | None:
        secret = await get(rig, SECRET, rig.system_namespace, f"{group_name(rig)}-config")
        if secret is None:
            return None
        configs = configs_of(secret)
        return configs if set(configs) == keys else None

    found: dict[str, JSONDict] = await rig.until(probe, what=f"the group config with {keys}")
    return found


async def group_pod(rig: Rig, old_uid: str = "") -> JSONDict:
    async def probe() -> JSONDict | None:
        pod = await get(rig, POD, rig.system_namespace, group_name(rig))
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod if pod["metadata"]["uid"] != old_uid else None

    found: JSONDict = await rig.until(probe, what="the group's pod")
    return found


async def role_names(rig: Rig, want: list[str]) -> JSONDict:
    async def probe() -> JSONDict | None:
        role = await get(rig, ROLE, rig.namespace, group_name(rig))
        return role if role is not None and role["rules"] == role_rules(*want) else None

    found: JSONDict = await rig.until(probe, what=f"the group Role naming {want}")
    return found


async def test_two_sets_share_one_pod_config_secret_and_role(rig: Rig) -> None:
    await member(rig, "small", minRunners=1)
    await member(rig, "big", maxRunners=50)
    configs = await group_config(rig, {"small-listener.json", "big-listener.json"})
    await group_pod(rig)
    await role_names(rig, ["big", "small"])
    await rig.settle()

    # Each set keeps its own scale set, bounds and metrics labels: one file each.
    small, big = configs["small-listener.json"], configs["big-listener.json"]
    assert (small["ephemeral_runner_set_name"], small["min_runners"]) == ("small", 1)
    assert (big["ephemeral_runner_set_name"], big["max_runners"]) == ("big", 50)
    # One pod, reading the folder of files; owned by both listeners, neither as controller.
    # Read after the settle: the pod may first have been made for the first set alone, its
    # second owner added on the next pass (a loaded machine made the two passes apart).
    pods = (await rig.objects.list(POD, rig.system_namespace))["items"]
    assert [p["metadata"]["name"] for p in pods] == [group_name(rig)]
    [pod] = pods
    [container] = pod["spec"]["containers"]
    assert {"name": "LISTENER_CONFIG_PATH", "value": LISTENER_CONFIG_MOUNT_PATH} in container["env"]
    assert pod["spec"]["serviceAccountName"] == group_name(rig)
    assert sorted(
        (ref["name"], ref["controller"]) for ref in pod["metadata"]["ownerReferences"]
    ) == [("big-listener", False), ("small-listener", False)]
    binding = await get(rig, ROLE_BINDING, rig.namespace, group_name(rig))
    assert binding is not None
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "namespace": rig.system_namespace, "name": group_name(rig)}
    ]
    # No listener of the group has children of its own.
    for name in ("small-listener", "big-listener"):
        assert await get(rig, SERVICE_ACCOUNT, rig.system_namespace, name) is None
        assert await get(rig, ROLE, rig.namespace, name) is None


async def test_a_set_naming_the_group_with_another_secret_is_refused_not_merged(
    rig: Rig,
) -> None:
    """A tenant of the namespace names a group whose pod holds another GitHub credential: its
    set is refused with the reason on its AutoscalingRunnerSet, the group's pod, config and
    Role stay exactly the first member's."""
    await member(rig, "victim")
    await group_config(rig, {"victim-listener.json"})
    first = await group_pod(rig)
    await member(rig, "intruder", githubConfigSecret="intruder-secret")

    async def refused() -> list[JSONDict]:
        items = (await rig.objects.list(EVENT, None))["items"]
        return [e for e in items if e["reason"] == "ListenerGroupRefused"]

    await rig.until(refused, what="ListenerGroupRefused Events")
    await rig.settle()
    said = await refused()
    assert sorted(e["involvedObject"]["kind"] for e in said) == [
        "AutoscalingListener",
        "AutoscalingRunnerSet",
    ]
    assert "spec.githubConfigSecret" in said[0]["message"]
    assert "victim-listener" not in said[0]["message"]
    assert "github-secret" not in said[0]["message"]
    assert set(await group_config(rig, {"victim-listener.json"})) == {"victim-listener.json"}
    assert (await group_pod(rig))["metadata"]["uid"] == first["metadata"]["uid"]
    await role_names(rig, ["victim"])


async def test_a_member_leaving_remakes_the_pod_for_the_others_and_the_last_removes_all(
    rig: Rig,
) -> None:
    """A member leaving: the group's pod is made again without it (its sessions end when the
    old pod stops and start again in the new one), and the Role loses its set once the old pod
    is gone. The last member leaving deletes the pod, Secret, Role, RoleBinding and
    ServiceAccount."""
    await member(rig, "a")
    await member(rig, "b")
    await group_config(rig, {"a-listener.json", "b-listener.json"})
    old = await group_pod(rig)
    await role_names(rig, ["a", "b"])

    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, "b-listener")
    await group_config(rig, {"a-listener.json"})
    new = await group_pod(rig, old_uid=old["metadata"]["uid"])
    assert [ref["name"] for ref in new["metadata"]["ownerReferences"]] == ["a-listener"]
    await role_names(rig, ["a"])

    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, "a-listener")

    async def all_gone() -> bool:
        name = group_name(rig)
        left = [
            await get(rig, POD, rig.system_namespace, name),
            await get(rig, SECRET, rig.system_namespace, f"{name}-config"),
            await get(rig, SERVICE_ACCOUNT, rig.system_namespace, name),
            await get(rig, ROLE, rig.namespace, name),
            await get(rig, ROLE_BINDING, rig.namespace, name),
            await get(rig, AUTOSCALING_LISTENER, rig.system_namespace, "a-listener"),
        ]
        return all(obj is None for obj in left)

    await rig.until(all_gone, what="every object of the group gone")


async def test_a_tenant_naming_the_group_from_another_namespace_gets_a_group_of_its_own(
    rig: Rig,
) -> None:
    """A tenant of another namespace names the same group with its own Secret: not refused and
    not merged, but another group, whose pod, config and Role are its own; the first group's
    stay exactly its member's."""
    tenant = f"{rig.namespace}-tenant"
    rig.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant}})
    for doc in yaml.safe_load_all(RUNNER_NAMESPACE_RBAC.read_text()):
        if doc:
            doc["metadata"]["namespace"] = tenant
            rig.kube.apply(doc)
    token = base64.b64encode(rig.gh.add_pat().encode()).decode()
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "intruder-secret", "namespace": tenant},
            "data": {"github_token": token},
        }
    )
    await member(rig, "victim")
    await group_config(rig, {"victim-listener.json"})
    await member(rig, "intruder", namespace=tenant, githubConfigSecret="intruder-secret")

    async def tenant_pod() -> JSONDict | None:
        return await get(rig, POD, rig.system_namespace, group_name(rig, tenant))

    await rig.until(tenant_pod, what="the tenant's group pod")
    await rig.settle()
    assert group_name(rig, tenant) != group_name(rig)
    assert set(await group_config(rig, {"victim-listener.json"})) == {"victim-listener.json"}
    await role_names(rig, ["victim"])
    tenant_role = await get(rig, ROLE, tenant, group_name(rig, tenant))
    assert tenant_role is not None
    assert tenant_role["rules"] == role_rules("intruder")
    events = (await rig.objects.list(EVENT, None))["items"]
    assert [e for e in events if e["reason"] == "ListenerGroupRefused"] == []


async def pods_named(rig: Rig, *names: str, not_uids: frozenset[str] = frozenset()) -> list[str]:
    """The uids of the group's pods once exactly `names` exist, none being deleted and none of
    `not_uids` (pods made again)."""

    async def probe() -> list[str] | None:
        items = (await rig.objects.list(POD, rig.system_namespace))["items"]
        if sorted(p["metadata"]["name"] for p in items) != sorted(names) or any(
            p["metadata"].get("deletionTimestamp") or p["metadata"]["uid"] in not_uids
            for p in items
        ):
            return None
        return [p["metadata"]["uid"] for p in items]

    uids: list[str] = await rig.until(probe, what=f"exactly the pods {names}")
    return uids


async def leases_are(rig: Rig, *names: str) -> None:
    async def probe() -> bool:
        items = (await rig.objects.list(LEASE, rig.namespace))["items"]
        return sorted(lease["metadata"]["name"] for lease in items) == sorted(names)

    await rig.until(probe, what=f"exactly the Leases {names}")


async def role_is(rig: Rig, rules: list[JSONDict]) -> None:
    async def probe() -> bool:
        role = await get(rig, ROLE, rig.namespace, group_name(rig))
        return role is not None and role["rules"] == rules

    await rig.until(probe, what=f"the group Role with {rules}")


async def test_a_group_with_standby_runs_a_pod_per_replica_and_a_lease_per_member(
    rig: Rig,
) -> None:
    """One member asking for two replicas gives the group two pods, each serving both members:
    a Lease per member, made before the pods, named in its config and granted (get and update,
    one rule each) by the group's Role. A member leaving: its Lease goes once the pods made
    without it are all that run, then its rule. Standby turned off: the extra pod, then every
    Lease and its rule."""
    name = group_name(rig)
    await member(rig, "a", listenerReplicas=2)
    await member(rig, "b")
    configs = await group_config(rig, {"a-listener.json", "b-listener.json"})
    first = await pods_named(rig, name, f"{name}-1")
    await leases_are(rig, "a-listener", "b-listener")
    await role_is(rig, role_rules("a", "b", leases=["a-listener", "b-listener"]))
    for member_name in ("a", "b"):
        made = configs[f"{member_name}-listener.json"]
        assert made["standby_lease_name"] == f"{member_name}-listener", "b is served with a Lease"
        assert made["standby_lease_duration_seconds"] > made["standby_renew_deadline_seconds"]
    creates = [
        r.resource
        for r in rig.kube.requests.log
        if r.verb == "create"
        and (r.resource, r.namespace) in {("leases", rig.namespace), ("pods", rig.system_namespace)}
    ]
    # The Leases are made before the pods that serve them. Only the first member's is checked
    # by order: the second may join after the first member's pass made pods for it alone
    # (seen under load), and the pods made again for both may still be on their way here.
    assert creates[0] == "leases", "the first member's Lease is made before any pod"
    lease = await get(rig, LEASE, rig.namespace, "b-listener")
    assert lease is not None
    assert lease["metadata"]["labels"]["actions.github.com/scale-set-name"] == "b"

    await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, "b-listener")
    await group_config(rig, {"a-listener.json"})
    await pods_named(rig, name, f"{name}-1", not_uids=frozenset(first))
    await leases_are(rig, "a-listener")
    await role_is(rig, role_rules("a", leases=["a-listener"]))

    await rig.objects.patch(
        AUTOSCALING_LISTENER, rig.system_namespace, "a-listener", {"spec": {"listenerReplicas": 1}}
    )
    await pods_named(rig, name)
    await leases_are(rig)
    await role_is(rig, role_rules("a"))
    configs = await group_config(rig, {"a-listener.json"})
    assert "standby_lease_name" not in configs["a-listener.json"]


async def test_the_last_members_leaving_delete_every_lease_of_the_group(rig: Rig) -> None:
    """Both members deleted at once: whichever is last finds every member's Lease on the
    group's Role and deletes them, then the Role; nothing of the group is left."""
    name = group_name(rig)
    await member(rig, "a", listenerReplicas=3)
    await member(rig, "b")
    await pods_named(rig, name, f"{name}-1", f"{name}-2")
    await leases_are(rig, "a-listener", "b-listener")
    for listener in ("a-listener", "b-listener"):
        await rig.objects.delete(AUTOSCALING_LISTENER, rig.system_namespace, listener)

    async def all_gone() -> bool:
        left = [
            await get(rig, SECRET, rig.system_namespace, f"{name}-config"),
            await get(rig, SERVICE_ACCOUNT, rig.system_namespace, name),
            await get(rig, ROLE, rig.namespace, name),
            await get(rig, ROLE_BINDING, rig.namespace, name),
        ]
        listeners = (await rig.objects.list(AUTOSCALING_LISTENER, rig.system_namespace))["items"]
        return all(obj is None for obj in left) and not listeners

    await rig.until(all_gone, what="every object of the group gone")
    await leases_are(rig)
    assert (await rig.objects.list(POD, rig.system_namespace))["items"] == []
