"""Listener standby (docs/listener.md#standby): two `gha-listener` processes of one scale set
share a Lease; the holder listens, the other takes over when the holder is SIGKILLed, ending the
dead holder's message session instead of meeting 409s until it expires, and no job is lost."""

from __future__ import annotations

import copy
import signal
import time
from typing import Any

import yaml

from listener.standby import SESSION_ANNOTATION
from shared.kube.errors import NotFound
from shared.kube.objects import LEASE
from shared.typedefs import JSONDict
from tests.listener.conftest import (
    PROJECT,
    Cluster,
    GitHub,
    Process,
    StartListener,
    eventually,
    listener_config,
    messages,
    readyz_until,
    wait_ready,
)
from tests.listener.test_e2e_job_started import recorded, start_job_on

STANDBY = PROJECT / "manifests" / "listener" / "standby" / "standby.yaml"
LEASE_NAME = "gha-listener"
# Short, so the test waits seconds for a takeover; the order the listener requires holds.
TIMING = {
    "standby_lease_name": LEASE_NAME,
    "standby_lease_duration_seconds": 3.0,
    "standby_renew_deadline_seconds": 2.0,
    "standby_retry_period_seconds": 0.5,
}


def apply_standby_manifests(cluster: Cluster, *, with_lease: bool = True) -> None:
    """manifests/listener/standby/ as the README's overlay applies it: the Lease, and the Role
    and RoleBinding that let the listener read and renew it (no create)."""
    for doc in yaml.safe_load_all(STANDBY.read_text()):
        if doc["kind"] == "Lease" and not with_lease:
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"]["namespace"] = cluster.namespace
        for subject in doc.get("subjects", []):
            subject["namespace"] = cluster.namespace
        cluster.kube.apply(doc)


async def lease(cluster: Cluster) -> JSONDict:
    return await cluster.objects.get(LEASE, cluster.namespace, LEASE_NAME)


async def holder(cluster: Cluster) -> str | None:
    try:
        spec = (await lease(cluster)).get("spec") or {}
    except NotFound:
        return None
    found = spec.get("holderIdentity")
    return str(found) if found else None


def leading(process: Process) -> bool:
    return "became leader" in messages(process)


def sessions(github: GitHub) -> list[str]:
    return [s.id for s in github.emulator.state.sessions.values()]


async def test_standby_takes_over_from_a_sigkilled_listener_without_a_409_and_loses_no_job(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    apply_standby_manifests(cluster)
    config = listener_config(cluster, github, **TIMING)
    first: Process = await spawn(config)
    await eventually(lambda: _true(leading(first) and bool(sessions(github))), what="a leader")
    await wait_ready(first)
    [first_session] = sessions(github)
    second: Process = await spawn(config)
    # The standby is ready (waiting is its job) and holds no session.
    assert "ok" in await readyz_until(second, ready=True)
    assert not leading(second)
    assert sessions(github) == [first_session]
    assert (await lease(cluster))["metadata"]["annotations"][SESSION_ANNOTATION] == first_session

    for name in ("runner-1", "runner-2"):
        await cluster.create_runner(name, phase="Pending")
    before = [await start_job_on(github, name, duration=1.0) for name in ("runner-1", "runner-2")]
    for name in ("runner-1", "runner-2"):
        assert (await recorded(cluster, name))["phase"] == "Running"

    first.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert await first.wait() == -signal.SIGKILL
    # Jobs queued while nobody listens: the standby must pick them up.
    for name in ("runner-3", "runner-4"):
        await cluster.create_runner(name, phase="Pending")
    after = [await start_job_on(github, name, duration=1.0) for name in ("runner-3", "runner-4")]

    async def second_listens() -> bool:
        return leading(second) and any(s != first_session for s in sessions(github))

    await eventually(second_listens, what="the standby's session", within=30)
    took_over = time.monotonic() - killed_at
    for name in ("runner-3", "runner-4"):
        assert (await recorded(cluster, name))["phase"] == "Running"

    async def every_job_done() -> bool:
        jobs = github.emulator.state.jobs
        return all(jobs[request].state == "completed" for request in before + after)

    await eventually(every_job_done, what="every job completed", within=30)
    assert f"deleted the previous listener's message session {first_session}" in messages(second)
    assert github.emulator.state.count("create_session", status=409) == 0
    assert github.emulator.state.count("create_session") == 2
    assert first_session not in sessions(github)
    await readyz_until(second, ready=True)
    # Seconds, not the minutes the service keeps an abandoned session: reported, not asserted
    # (a wall-clock bound would be flaky); the Lease's duration is 3 s here.
    print(f"standby took over {took_over:.1f}s after the SIGKILL")


async def _true(value: bool) -> bool:
    return value


async def test_sigterm_releases_the_lease_and_the_standby_opens_the_next_session(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    apply_standby_manifests(cluster)
    # A lease long enough that only a release explains a takeover before it ends.
    config = listener_config(
        cluster,
        github,
        **{**TIMING, "standby_lease_duration_seconds": 600, "standby_renew_deadline_seconds": 2},
    )
    first: Process = await spawn(config)
    await eventually(lambda: _true(leading(first) and bool(sessions(github))), what="a leader")
    second: Process = await spawn(config)
    await wait_ready(second)
    first.proc.send_signal(signal.SIGTERM)
    assert await first.wait() == 0
    assert "released the lease" in messages(first)
    await eventually(lambda: _true(leading(second) and bool(sessions(github))), what="takeover")
    assert github.emulator.state.count("create_session", status=409) == 0
    assert "the previous listener's message session" in " ".join(messages(second))


async def test_a_listener_that_loses_the_lease_stops_listening_and_stands_by_again(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    apply_standby_manifests(cluster)
    running = await start_listener(**TIMING)
    await eventually(lambda: _true(len(sessions(github)) == 1), what="the session")
    [session] = sessions(github)
    taken = await lease(cluster)
    # Another replica takes the Lease (as one would after the renewals failed).
    taken["spec"]["holderIdentity"] = "someone-else"
    taken["spec"]["leaseDurationSeconds"] = 600
    await cluster.objects.replace(LEASE, cluster.namespace, taken)
    await eventually(lambda: _true(session not in sessions(github)), what="the session deleted")
    assert not running.task.done()
    assert await holder(cluster) == "someone-else"
    # It stands by again: when the other replica releases the Lease, it listens once more.
    released = await lease(cluster)
    released["spec"].pop("holderIdentity")
    await cluster.objects.replace(LEASE, cluster.namespace, released)
    await eventually(lambda: _true(len(sessions(github)) == 1), what="a new session")
    assert await holder(cluster) not in (None, "someone-else")


async def test_a_standby_without_the_lease_rule_refuses_to_start_naming_it(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    """The Lease exists but the Role of manifests/listener/standby/ was not applied."""
    await cluster.objects.create(
        LEASE,
        cluster.namespace,
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE_NAME}},
    )
    process: Process = await spawn(listener_config(cluster, github, **TIMING))
    assert await process.wait() == 2
    [line] = [m for m in messages(process) if m.startswith("cannot start")]
    assert "get leases" in line
    assert "update leases" in line
    assert "{apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: " in line
    assert "create" not in line


async def test_a_missing_lease_needs_create_and_says_so(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    apply_standby_manifests(cluster, with_lease=False)
    process: Process = await spawn(listener_config(cluster, github, **TIMING))
    assert await process.wait() == 2
    [line] = [m for m in messages(process) if m.startswith("cannot start")]
    assert "may not create leases in namespace" in line
    assert "get leases" not in line
