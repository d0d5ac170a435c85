"""A listener group in the cluster (docs/autoscaling.md#listener-groups): the install of
tests/controller/test_in_cluster.py (admission policies included), two example
AutoscalingRunnerSets naming one group, and the Kubernetes emulator's kubelet running the
controller and the group's one listener pod as real processes. Both sets run their jobs through
the one `gha-listener`, with the one Role naming exactly their two EphemeralRunnerSets; one set
leaving makes the pod again for the other, whose jobs still run; the last one leaving removes
every object of the group."""

from __future__ import annotations

from controller.autoscalinglistener.group import Group
from controller.autoscalinglistener.objects import role_rules
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.api.names import ANNOTATION_LISTENER_GROUP
from shared.kube.objects import POD, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT
from shared.typedefs import JSONDict
from tests.controller.listenerpods import PODS_AS_PROCESSES, can_i, grouped_set, jobs_run, ready
from tests.controller.test_in_cluster import NAME, RUNNERS, SYSTEM, Cluster, install
from tests.controller.test_in_cluster import cluster as cluster

pytestmark = PODS_AS_PROCESSES

OTHER = "big-runners"


async def test_two_sets_one_listener_pod_then_one_leaves_then_none(cluster: Cluster) -> None:
    await install(cluster)
    await cluster.kubectl(
        "-n",
        RUNNERS,
        "annotate",
        "autoscalingrunnerset",
        NAME,
        f"{ANNOTATION_LISTENER_GROUP}=linux",
    )
    await grouped_set(cluster, OTHER)
    group = Group(namespace=RUNNERS, name="linux", home=SYSTEM).object_name

    async def serving() -> JSONDict | None:
        pod = await cluster.get(POD, SYSTEM, group)
        if not ready(pod) or len(cluster.gh.state.sessions) != 2:
            return None
        return pod

    pod = await cluster.until(serving, what="the group's pod Ready with a session per set")
    listeners = (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
    assert len(listeners) == 2
    pods = (await cluster.objects.list(POD, SYSTEM))["items"]
    assert sorted(p["metadata"]["name"] for p in pods if "listener" in p["metadata"]["name"]) == [
        group
    ]
    role = await cluster.get(ROLE, RUNNERS, group)
    assert role is not None
    assert role["rules"] == role_rules(OTHER, NAME)
    # The group's identity patches its members' sets and no other.
    user = f"system:serviceaccount:{SYSTEM}:{group}"
    for resource, want in (
        (f"ephemeralrunnersets/{NAME}", "yes"),
        (f"ephemeralrunnersets/{OTHER}", "yes"),
        ("ephemeralrunnersets/someone-else", "no"),
    ):
        assert await can_i(cluster, "patch", resource, user) == want, resource
    await jobs_run(cluster, NAME, OTHER)

    # One set leaves: the pod is made again for the other, whose session pauses meanwhile
    # (2.3-3.2 s here: the old pod's SIGTERM, the new pod's start and its session).
    await cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", OTHER, "--timeout=60s")

    async def remade() -> JSONDict | None:
        new = await cluster.get(POD, SYSTEM, group)
        if new is None or new["metadata"]["uid"] == pod["metadata"]["uid"] or not ready(new):
            return None
        return new if len(cluster.gh.state.sessions) == 1 else None

    await cluster.until(remade, what="the group's pod made again for the set left")
    role = await cluster.get(ROLE, RUNNERS, group)
    assert role is not None
    assert role["rules"] == role_rules(NAME)
    await jobs_run(cluster, NAME)

    await cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", NAME, "--timeout=60s")

    async def all_gone() -> bool:
        left = [
            await cluster.get(kind, namespace, name)
            for kind, namespace, name in (
                (POD, SYSTEM, group),
                (SECRET, SYSTEM, f"{group}-config"),
                (SERVICE_ACCOUNT, SYSTEM, group),
                (ROLE, RUNNERS, group),
                (ROLE_BINDING, RUNNERS, group),
            )
        ]
        return left == [None] * len(left)

    await cluster.until(all_gone, what="every object of the group gone")
    assert (await cluster.objects.list(AUTOSCALING_RUNNER_SET, RUNNERS))["items"] == []
