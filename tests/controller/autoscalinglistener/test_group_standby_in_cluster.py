"""A listener group with standby in the cluster (docs/autoscaling.md#standby-for-a-group): the
install of tests/controller/test_in_cluster.py with the shortened standby timings of
test_standby_in_cluster.py, three example AutoscalingRunnerSets naming one group, one of them
asking for two listener replicas, and the Kubernetes emulator's kubelet running the controller
and the group's two listener pods as real processes. Each pod serves every set and holds the
sessions of the sets whose Lease it holds (here the first pod to start takes them all: the
Leases are free then); the pod holding the first set's Lease is SIGKILLed while jobs of every
set run: the other pod takes its Leases, ends its sessions, and every job completes. A fourth
set joining replaces the pods one at a time, one always Ready. Deleting the sets removes the
pods and every Lease."""

from __future__ import annotations

import os
import signal

from controller.autoscalinglistener.group import Group
from controller.autoscalinglistener.objects import role_rules
from shared.api.kinds import AUTOSCALING_LISTENER
from shared.kube.objects import LEASE, POD, ROLE
from shared.typedefs import JSONDict
from tests.controller.listenerpods import (
    PODS_AS_PROCESSES,
    can_i,
    grouped_set,
    jobs_run,
    jobs_succeed,
    ready,
)
from tests.controller.test_in_cluster import NAME, RUNNERS, SYSTEM, Cluster, install_up_to_the_set
from tests.controller.test_in_cluster import cluster as cluster
from tests.controller.test_standby_in_cluster import STANDBY_ENV, holder_pod, logs, pid_of

pytestmark = PODS_AS_PROCESSES

SETS = (NAME, "big-runners", "gpu-runners")
JOINING = "arm-runners"
JOB_SECONDS = 2.0


async def test_a_group_pod_sigkilled_hands_its_sessions_to_the_other_and_no_job_is_lost(
    cluster: Cluster,
) -> None:
    await install_up_to_the_set(cluster, STANDBY_ENV)
    # One member asks for two replicas; the group runs two pods for all three.
    await grouped_set(cluster, NAME, listenerReplicas=2)
    for name in SETS[1:]:
        await grouped_set(cluster, name)
    group = Group(namespace=RUNNERS, name="linux", home=SYSTEM).object_name
    names = (group, f"{group}-1")

    async def listeners() -> dict[str, JSONDict] | None:
        items = (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
        found = {item["spec"]["autoscalingRunnerSetName"]: item for item in items}
        ids = [item["spec"].get("runnerScaleSetId") for item in found.values()]
        return found if len(found) == len(SETS) and all(ids) else None

    by_set = await cluster.until(listeners, what="a listener per set")
    leases = {name: by_set[name]["metadata"]["name"] for name in SETS}

    async def serving() -> list[JSONDict] | None:
        pods = [await cluster.get(POD, SYSTEM, name) for name in names]
        found = [pod for pod in pods if pod is not None and ready(pod)]
        if len(found) != 2 or len(cluster.gh.state.sessions) != len(SETS):
            return None
        holders = [await holder_pod(cluster, lease, found) for lease in leases.values()]
        return found if all(holders) else None

    pods = await cluster.until(serving, what="both pods Ready and every set's Lease held")
    role = await cluster.get(ROLE, RUNNERS, group)
    assert role is not None
    assert role["rules"] == role_rules(*sorted(SETS), leases=sorted(leases.values()))
    # The group's identity renews its members' Leases and no other, and creates none.
    user = f"system:serviceaccount:{SYSTEM}:{group}"
    asked = [("update", f"leases/{lease}", "yes") for lease in leases.values()]
    asked += [("get", "leases/someone-else", "no"), ("create", "leases", "no")]
    for verb, resource, want in asked:
        assert await can_i(cluster, verb, resource, user) == want, (verb, resource)

    async def holders() -> dict[str, str]:
        held = {}
        for name, lease in leases.items():
            pod = await holder_pod(cluster, lease, pods)
            assert pod is not None, name
            held[name] = pod["metadata"]["name"]
        return held

    before_kill = await holders()
    victim = next(pod for pod in pods if pod["metadata"]["name"] == before_kill[NAME])
    [survivor] = [pod for pod in pods if pod is not victim]
    session_of = {
        session.scale_set_id: session_id
        for session_id, session in cluster.gh.state.sessions.items()
    }
    sessions = {name: session_of[by_set[name]["spec"]["runnerScaleSetId"]] for name in SETS}
    moved = [name for name in SETS if before_kill[name] == victim["metadata"]["name"]]

    before = [
        cluster.gh.enqueue_job(labels=[name], duration=JOB_SECONDS) for name in SETS for _ in "ab"
    ]

    async def some_running() -> bool:
        return sum(1 for _, phase, _ in cluster.writes if phase == "Running") >= len(SETS)

    await cluster.until(some_running, what="jobs running before the kill")
    os.kill(pid_of(cluster, victim), signal.SIGKILL)
    # Queued while the victim's sets have nobody listening: the survivor must be offered them.
    after = [cluster.gh.enqueue_job(labels=[name], duration=JOB_SECONDS) for name in SETS]

    async def taken_over() -> bool:
        return all(
            [await holder_pod(cluster, lease, [survivor]) is not None for lease in leases.values()]
        )

    await cluster.until(taken_over, what="the surviving pod holding every set's Lease")

    await jobs_succeed(cluster, before + after, what="every job completed")
    assert cluster.gh.state.count("create_session", status=409) == 0
    survivor_log = logs(cluster, survivor)
    for name in moved:
        # The dead holder's session ended by its successor, not left to expire.
        assert f"deleted the previous listener's message session {sessions[name]}" in survivor_log
        assert sessions[name] not in cluster.gh.state.sessions
    running = {actor for _, phase, actor in cluster.writes if phase == "Running"}
    assert running == {f"system:serviceaccount:{SYSTEM}:{group}"}

    # The controller makes the killed pod again, and it stands by.
    async def made_again() -> bool:
        pod = await cluster.get(POD, SYSTEM, victim["metadata"]["name"])
        return (
            pod is not None and pod["metadata"]["uid"] != victim["metadata"]["uid"] and ready(pod)
        )

    await cluster.until(made_again, what="the killed replica made again")

    # A fourth set joins: every pod's config changes. The pods are replaced one at a time, so
    # one of them is always Ready to hold the sessions, and the sessions move on SIGTERM.
    await grouped_set(cluster, JOINING)
    old_uids = set()
    for name in names:
        pod = await cluster.get(POD, SYSTEM, name)
        assert pod is not None
        old_uids.add(pod["metadata"]["uid"])
    gaps = 0

    async def replaced() -> bool:
        nonlocal gaps
        now = [await cluster.get(POD, SYSTEM, name) for name in names]
        serving = [
            p for p in now if ready(p) and not (p or {})["metadata"].get("deletionTimestamp")
        ]
        gaps += not serving
        fresh = [p for p in serving if p is not None and p["metadata"]["uid"] not in old_uids]
        return len(fresh) == 2 and len(cluster.gh.state.sessions) == len(SETS) + 1

    await cluster.until(replaced, what="both pods made again with the fourth set")
    assert gaps == 0, "no moment without a Ready pod"
    await jobs_run(cluster, *SETS, JOINING)
    assert cluster.gh.state.count("create_session", status=409) == 0

    for name in (*SETS, JOINING):
        await cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", name, "--wait=false")

    async def all_gone() -> bool:
        left = [await cluster.get(POD, SYSTEM, name) for name in names]
        left.append(await cluster.get(ROLE, RUNNERS, group))
        every_lease = (await cluster.objects.list(LEASE, RUNNERS))["items"]
        return left == [None] * len(left) and not every_lease

    await cluster.until(all_gone, what="the group's pods, Leases and Role gone")
