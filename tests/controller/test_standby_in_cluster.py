"""Listener standby in the cluster (docs/autoscaling.md#listener-standby): the install of
tests/controller/test_in_cluster.py, the example AutoscalingRunnerSet with `listenerReplicas: 2`,
and the Kubernetes emulator's kubelet running the controller and both listener pods as real
processes. The listener of the pod holding the Lease is SIGKILLed while jobs run, as an OOM kill
or a lost node would end it: the other pod takes the Lease, ends the dead holder's session
instead of meeting 409s, every job completes, and the controller makes the dead pod again.

The process is killed directly: deleting the pod with grace period 0 would not do, since the
emulator's kubelet then still sends SIGTERM first (and a real kubelet gives at least two
seconds), which lets the listener hand the Lease over gracefully."""

from __future__ import annotations

import contextlib
import os
import signal

import yaml

from shared.api.kinds import AUTOSCALING_LISTENER
from shared.kube.objects import LEASE, POD, ROLE
from shared.typedefs import JSONDict
from tests.controller.listenerpods import PODS_AS_PROCESSES, jobs_succeed, ready
from tests.controller.test_in_cluster import (
    NAME,
    RUNNERS,
    SYSTEM,
    Cluster,
    example_set,
    install_up_to_the_set,
    listener_of,
)
from tests.controller.test_in_cluster import cluster as cluster

pytestmark = PODS_AS_PROCESSES

# Shorter than the defaults (15, 10, 2 s) so that a takeover takes seconds, and long enough
# that renewals keep up on a loaded machine (a holder that cannot renew in time would stop).
STANDBY_ENV = {
    "GHA_CONTROLLER_LISTENER_STANDBY_LEASE_DURATION_SECONDS": "6",
    "GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS": "4",
    "GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS": "1",
}
JOB_SECONDS = 2.0


async def install_with_standby(cluster: Cluster) -> None:
    """docs/install.md's install, the controller given the standby timings, and the example set
    with two listener replicas."""
    await install_up_to_the_set(cluster, STANDBY_ENV)
    example = yaml.safe_load(example_set(cluster.gh.config_url("my-org")))
    example["spec"]["listenerReplicas"] = 2
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(example))


def logs(cluster: Cluster, pod: JSONDict) -> str:
    processes = cluster.kube.processes
    assert processes is not None
    return processes.logs(pod, "listener")


def pid_of(cluster: Cluster, pod: JSONDict) -> int:
    """The pid of the pod's `gha-listener`: the kubelet runs it in the pod's directory."""
    processes = cluster.kube.processes
    assert processes is not None
    directory = os.path.realpath(processes.pod_dir(pod))
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{entry}/cwd") == directory:
                return int(entry)
    raise AssertionError(f"no process runs in {directory}")


async def holder_pod(cluster: Cluster, listener: str, pods: list[JSONDict]) -> JSONDict | None:
    """The pod whose listener holds the Lease: the Lease's `holderIdentity` (a host name and a
    random suffix) appears in that listener's log, in its "became leader" line."""
    lease = await cluster.get(LEASE, RUNNERS, listener)
    holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
    if not holder:
        return None
    found = [pod for pod in pods if f'"{holder}"' in logs(cluster, pod)]
    return found[0] if len(found) == 1 else None


async def test_the_standby_pod_takes_over_from_a_sigkilled_holder_and_no_job_is_lost(
    cluster: Cluster,
) -> None:
    await install_with_standby(cluster)
    listener = (await listener_of(cluster))["metadata"]["name"]
    names = (listener, f"{listener}-1")
    listener_user = f"system:serviceaccount:{SYSTEM}:{listener}"

    async def both_ready() -> list[JSONDict] | None:
        pods = [await cluster.get(POD, SYSTEM, name) for name in names]
        found = [pod for pod in pods if pod is not None and ready(pod)]
        return found if len(found) == 2 else None

    pods = await cluster.until(both_ready, what="both listener pods Ready")
    role = await cluster.get(ROLE, RUNNERS, listener)
    assert role is not None
    assert role["rules"][-1]["resourceNames"] == [listener]

    async def holding() -> JSONDict | None:
        return await holder_pod(cluster, listener, pods) if cluster.gh.state.sessions else None

    active = await cluster.until(holding, what="one pod holding the Lease and a session")
    [standby] = [pod for pod in pods if pod["metadata"]["name"] != active["metadata"]["name"]]
    [first_session] = list(cluster.gh.state.sessions)

    before = [cluster.gh.enqueue_job(labels=[NAME], duration=JOB_SECONDS) for _ in range(3)]

    async def some_running() -> bool:
        return sum(1 for _, phase, _ in cluster.writes if phase == "Running") >= 2

    await cluster.until(some_running, what="jobs running under the first holder")
    os.kill(pid_of(cluster, active), signal.SIGKILL)
    # Queued while nobody listens: the standby must be offered them.
    after = [cluster.gh.enqueue_job(labels=[NAME], duration=JOB_SECONDS) for _ in range(3)]

    async def taken_over() -> bool:
        return await holder_pod(cluster, listener, [standby]) is not None

    await cluster.until(taken_over, what="the standby holding the Lease")

    await jobs_succeed(cluster, before + after, what="every job completed")
    assert cluster.gh.state.count("create_session", status=409) == 0
    assert "released the lease" not in logs(cluster, active), "killed, not stopped"
    assert f"deleted the previous listener's message session {first_session}" in logs(
        cluster, standby
    )
    assert first_session not in cluster.gh.state.sessions
    running = {actor for _, phase, actor in cluster.writes if phase == "Running"}
    assert running == {listener_user}, "only the listener's identity writes Running"

    # The controller makes the killed pod again, and it stands by.
    async def made_again() -> bool:
        pod = await cluster.get(POD, SYSTEM, active["metadata"]["name"])
        return (
            pod is not None and pod["metadata"]["uid"] != active["metadata"]["uid"] and ready(pod)
        )

    await cluster.until(made_again, what="the killed replica made again")
    assert await holder_pod(cluster, listener, [standby]) is not None

    # Deleting the set removes both pods, then the Lease.
    await cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", NAME, "--timeout=60s")
    assert (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"] == []
    for name in names:
        assert await cluster.get(POD, SYSTEM, name) is None, name
    assert await cluster.get(LEASE, RUNNERS, listener) is None
