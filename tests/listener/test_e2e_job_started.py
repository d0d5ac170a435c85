"""JobStarted -> the EphemeralRunner's job fields, and Running only for a live runner."""

from __future__ import annotations

import copy
import logging
import uuid
from typing import Any

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from tests.listener.conftest import RUNNER_SET, Cluster, GitHub, StartListener, eventually

REPOSITORY = "octo-org/hello"
WORKFLOW_REF = "octo-org/hello/.github/workflows/ci.yml@refs/heads/main"


def has_job(runner: dict[str, Any]) -> bool:
    return bool(runner.get("status", {}).get("jobId"))


async def start_job_on(github: GitHub, runner_name: str, *, duration: float = 60.0) -> int:
    """A job that the simulated runner `runner_name` takes and keeps running."""
    [request_id] = github.enqueue(
        duration=duration,
        repository=REPOSITORY,
        workflow_ref=WORKFLOW_REF,
        display_name="build",
    )
    await github.start_runner(runner_name)
    return request_id


async def recorded(cluster: Cluster, name: str) -> dict[str, Any]:
    async def job_written() -> bool:
        return has_job(await cluster.runner(name))

    await eventually(job_written, what=f"the job fields on {name}")
    status: dict[str, Any] = (await cluster.runner(name))["status"]
    return status


async def test_pending_runner_becomes_running_with_every_job_field(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await cluster.create_runner("runner-a", phase="Pending")
    await start_listener()
    request_id = await start_job_on(github, "runner-a")
    status = await recorded(cluster, "runner-a")
    job = github.emulator.state.jobs[request_id]
    assert status["phase"] == "Running"
    assert status["jobRequestId"] == request_id
    assert status["jobRepositoryName"] == REPOSITORY
    assert status["jobId"] == job.job_id
    assert status["workflowRunId"] == job.workflow_run_id
    assert status["jobWorkflowRef"] == WORKFLOW_REF
    assert status["jobDisplayName"] == "build"
    # The listener's User-Agent names it the manager of what it wrote
    # (docs/listener.md#kubernetes-requests).
    managers = {
        (e["manager"], e.get("subresource", ""))
        for e in (await cluster.runner("runner-a"))["metadata"]["managedFields"]
        if "f:phase" in e["fieldsV1"].get("f:status", {})
    }
    assert managers == {("gha-listener", "status")}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Outdated"])
async def test_terminal_runner_gets_the_job_fields_and_keeps_its_phase(
    cluster: Cluster, github: GitHub, start_listener: StartListener, phase: str
) -> None:
    await cluster.create_runner("runner-a", phase=phase)
    await start_listener()
    await start_job_on(github, "runner-a")
    status = await recorded(cluster, "runner-a")
    assert status["phase"] == phase
    assert status["jobRepositoryName"] == REPOSITORY


async def test_deleting_runner_keeps_its_phase(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await cluster.create_runner("runner-a", phase="Pending", deleting=True)
    await start_listener()
    await start_job_on(github, "runner-a")
    status = await recorded(cluster, "runner-a")
    assert status["phase"] == "Pending"
    assert (await cluster.runner("runner-a"))["metadata"]["deletionTimestamp"]


async def test_missing_runner_is_skipped_and_the_listener_keeps_going(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    running = await start_listener()
    await start_job_on(github, "no-such-runner")

    async def ghost_looked_up() -> bool:
        return (
            cluster.kube.requests.count(
                verb="get", resource="ephemeralrunners", user=cluster.listener_user, code=404
            )
            > 0
        )

    await eventually(ghost_looked_up, what="the missing runner looked up")
    await cluster.create_runner("runner-b", phase="Pending")
    await start_job_on(github, "runner-b")
    status = await recorded(cluster, "runner-b")
    assert status["phase"] == "Running"
    assert not running.task.done()


async def test_terminal_phase_written_between_get_and_patch_survives(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await cluster.create_runner("runner-a", phase="Pending")
    # Hold the listener's status patch on the server after its GET, long enough for the
    # controller's write (an update, so the hold does not apply to it) to land first, and
    # shorter than the listener's request timeout, so the held patch is answered (409), not
    # abandoned and sent again.
    hold = cluster.kube.faults.latency(3.0, verb="patch", resource="ephemeralrunners")
    await start_listener(kube_request_timeout_seconds=10)
    await start_job_on(github, "runner-a")

    async def runner_read() -> bool:
        return (
            cluster.kube.requests.count(
                verb="get", resource="ephemeralrunners", user=cluster.listener_user
            )
            > 0
        )

    await eventually(runner_read, what="the listener's GET of the runner")
    current = await cluster.runner("runner-a")
    current["status"]["phase"] = "Failed"
    await cluster.replace_runner_status(current)
    cluster.kube.faults.remove(hold)
    status = await recorded(cluster, "runner-a")
    assert status["phase"] == "Failed"
    assert status["jobRequestId"] > 0
    conflicts = cluster.kube.requests.count(
        verb="patch", resource="ephemeralrunners", subresource="status", code=409
    )
    assert conflicts == 1


async def test_listener_service_account_suffices_for_a_full_job_cycle(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await cluster.create_runner("runner-a", phase="Pending")
    await start_listener(min_runners=0)
    await start_job_on(github, "runner-a", duration=0.2)
    await recorded(cluster, "runner-a")

    async def settled_after_completion() -> bool:
        spec = await cluster.runner_set_spec()
        completed = github.emulator.state.jobs and all(
            job.state == "completed" for job in github.emulator.state.jobs.values()
        )
        return bool(completed and spec["replicas"] == 0 and spec["patchID"] == 0)

    await eventually(settled_after_completion, what="the job completed and the set settled at 0")
    user = cluster.listener_user
    requests = cluster.kube.requests
    assert requests.count(user=user, verb="get", resource="ephemeralrunners", code=200) >= 1
    assert requests.count(user=user, verb="patch", subresource="status", code=200) >= 1
    assert requests.count(user=user, verb="patch", resource="ephemeralrunnersets", code=200) >= 3
    assert cluster.forbidden_requests() == 0


async def test_redelivered_job_started_patches_nothing(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="listener.service")
    await cluster.create_runner("runner-a", phase="Pending")
    running = await start_listener()
    [request_id] = github.enqueue(duration=60.0)
    state = github.emulator.state

    queue = state.queues[github.scale_set_id]

    async def assigned_and_acknowledged() -> bool:
        return (
            state.jobs[request_id].state == "assigned" and not queue.pending and not queue.messages
        )

    await eventually(assigned_and_acknowledged, what="the JobAssigned batch acknowledged")
    # The acknowledgement of the JobStarted batch fails as if the session were gone: the batch
    # is handled, and the new session delivers it again.
    github.emulator.faults.inject("delete_message", status=404, count=1)
    await github.start_runner("runner-a")
    await recorded(cluster, "runner-a")

    # Wait for the listener's report of each handled JobStarted, not for its second GET: that
    # GET comes before the decision, so a wrong second patch could follow the count below.
    async def handled_twice() -> bool:
        handled = [
            record
            for record in caplog.records
            if record.name == "listener.service"
            and record.getMessage().startswith("JobStarted job ")
        ]
        return len(handled) >= 2

    await eventually(handled_twice, what="the redelivered JobStarted handled")
    assert state.count("create_session", status=200) == 2
    gets = cluster.kube.requests.count(
        verb="get", resource="ephemeralrunners", user=cluster.listener_user
    )
    assert gets >= 2
    patches = cluster.kube.requests.count(
        verb="patch", subresource="status", user=cluster.listener_user
    )
    assert patches == 1
    assert (await cluster.runner("runner-a"))["status"]["phase"] == "Running"
    assert not running.task.done()


@pytest.mark.parametrize("owner", ["other-set", "earlier-set-of-the-same-name"])
async def test_runner_of_another_set_is_left_alone(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
    owner: str,
) -> None:
    """The JobStarted names a runner that exists in the namespace but whose controller is
    another EphemeralRunnerSet (another scale set's runner of the same name), or a set of this
    name deleted and made again: its status is not touched."""
    caplog.set_level(logging.INFO, logger="listener.service")
    if owner == "other-set":
        other = copy.deepcopy(
            await cluster.objects.get(EPHEMERAL_RUNNER_SET, cluster.namespace, RUNNER_SET)
        )
        other["metadata"] = {"name": "other-runners", "namespace": cluster.namespace}
        await cluster.objects.create(EPHEMERAL_RUNNER_SET, cluster.namespace, other)
        await cluster.create_runner("runner-a", phase="Pending", runner_set="other-runners")
    else:
        await cluster.create_runner("runner-a", phase="Pending", owner_uid=str(uuid.uuid4()))
    running = await start_listener()
    await start_job_on(github, "runner-a")

    async def left_alone() -> bool:
        return any(
            record.getMessage().endswith(
                "on runner runner-a: runner not owned by this listener's EphemeralRunnerSet, "
                "left alone"
            )
            and record.levelno == logging.WARNING
            for record in caplog.records
        )

    await eventually(left_alone, what="the JobStarted on another set's runner logged")
    status = (await cluster.runner("runner-a"))["status"]
    assert status == {"phase": "Pending"}
    patches = cluster.kube.requests.count(
        verb="patch", subresource="status", user=cluster.listener_user
    )
    assert patches == 0
    assert not running.task.done()


async def test_a_batch_of_job_started_alone_is_not_published(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """Its patch would carry the count the set was last patched for under a served non-zero
    id: nothing the controller may act on (docs/listener.md, "Replicas and the patch id")."""
    await cluster.create_runner("runner-a", phase="Pending")
    await start_listener(long_poll_timeout_seconds=50)
    [request_id] = github.enqueue(duration=60.0)

    async def published_for_the_job() -> bool:
        spec = await cluster.runner_set_spec()
        return spec.get("replicas") == 1 and spec.get("patchID", 0) > 0

    await eventually(published_for_the_job, what="replicas=1 under a new patch id")
    before = await cluster.runner_set_spec()
    patches = cluster.kube.requests.count(
        verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user
    )
    await github.start_runner("runner-a")
    await recorded(cluster, "runner-a")
    assert github.emulator.state.jobs[request_id].state != "completed"
    assert await cluster.runner_set_spec() == before
    assert (
        cluster.kube.requests.count(
            verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user
        )
        == patches
    )


async def test_a_job_offered_at_max_runners_is_not_published_until_one_completes(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At maxRunners an offered job leaves the count where it is: a new patch id with it would
    let the controller add a runner where one is missing, and none is (no job completed). It
    used to be published, a set patch per job and a wake of the controller's set for nothing
    (docs/listener.md, "Replicas and the patch id"). A completed job is published: its runner's
    slot may need refilling."""
    caplog.set_level(logging.DEBUG, logger="listener.service")
    await cluster.create_runner("runner-a", phase="Pending")
    await start_listener(max_runners=1, long_poll_timeout_seconds=50)
    [first] = github.enqueue(duration=0.5)

    async def published_for_the_first() -> bool:
        spec = await cluster.runner_set_spec()
        return spec.get("replicas") == 1 and spec.get("patchID", 0) > 0

    await eventually(published_for_the_first, what="replicas=1 under a new patch id")
    before = await cluster.runner_set_spec()

    def set_patches() -> int:
        return cluster.kube.requests.count(
            verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user
        )

    patches = set_patches()
    github.enqueue(duration=60.0)

    async def held() -> bool:
        return any("not published: replicas=1" in r.getMessage() for r in caplog.records)

    await eventually(held, what="the offer at maxRunners not published")
    assert await cluster.runner_set_spec() == before
    assert set_patches() == patches
    await github.start_runner("runner-a")

    async def completed_published() -> bool:
        spec = await cluster.runner_set_spec()
        done = github.emulator.state.jobs[first].state == "completed"
        return done and spec.get("patchID", 0) > before["patchID"]

    await eventually(completed_published, what="the completed job published")
    assert (await cluster.runner_set_spec())["replicas"] == 1
