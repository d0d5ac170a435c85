"""Jobs: routing by labels, JobAvailable -> acquirejobs -> JobAssigned, acquirable jobs, the
direct-assignment flow, cancellation and statistics (docs/sandbox-actions.md#service-behaviour)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import aiohttp
import pytest

from sandbox.actions import ActionsEmulator
from sandbox.actions.state.records import Runner
from tests.sandbox.actions.wire import SCALE_SETS, Service, authenticate, job_messages

ZERO = "0001-01-01T00:00:00Z"


async def test_job_available_carries_the_job_fields(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(
        labels=["self-hosted", "arc"],
        repository="octo/app",
        workflow_ref="octo/app/.github/workflows/ci.yaml@refs/pull/7/merge",
        display_name="test (3.12)",
        event_name="pull_request",
    )

    message = (await service.get_message(session)).json
    (job,) = job_messages(message)

    assert job["messageType"] == "JobAvailable"
    assert job["runnerRequestId"] == request_id
    assert (job["ownerName"], job["repositoryName"]) == ("octo", "app")
    assert job["jobWorkflowRef"] == "octo/app/.github/workflows/ci.yaml@refs/pull/7/merge"
    assert (job["jobDisplayName"], job["eventName"]) == ("test (3.12)", "pull_request")
    assert job["requestLabels"] == ["self-hosted", "arc"]
    assert isinstance(job["jobId"], str)
    assert isinstance(job["workflowRunId"], int)
    assert job["queueTime"].endswith("Z")
    assert job["queueTime"] != ZERO
    assert job["scaleSetAssignTime"] == ZERO
    assert job["acquireJobUrl"].endswith(f"/runnerscalesets/{scale_set['id']}/acquirejobs")
    assert message["statistics"]["totalAvailableJobs"] == 1


async def test_acquire_assigns_and_emits_job_assigned(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    available = (await service.get_message(session)).json
    await service.delete_message(session, available["messageId"])

    acquired = await service.acquire(session, scale_set["id"], [request_id])
    assigned = (await service.get_message(session, last_message_id=available["messageId"])).json

    assert (acquired.status, acquired.json) == (200, {"count": 1, "value": [request_id]})
    (job,) = job_messages(assigned)
    assert (job["messageType"], job["runnerRequestId"]) == ("JobAssigned", request_id)
    assert job["scaleSetAssignTime"] != ZERO
    assert assigned["statistics"]["totalAssignedJobs"] == 1
    assert assigned["statistics"]["totalAvailableJobs"] == 0
    assert actions.state.jobs[request_id].state == "assigned"


async def test_acquire_is_idempotent_and_skips_foreign_ids(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set = await service.create_scale_set("arc")
    await service.create_scale_set("other")
    session = await service.open_session(scale_set["id"])
    mine = actions.enqueue_job(labels=["arc"])
    foreign = actions.enqueue_job(labels=["other"])

    first = await service.acquire(session, scale_set["id"], [mine, foreign, 424242])
    second = await service.acquire(session, scale_set["id"], [mine])
    empty = await service.acquire(session, scale_set["id"], [])

    assert first.json == {"count": 1, "value": [mine]}
    assert actions.state.requests[-3].body == f"[{mine}, {foreign}, 424242]"
    assert second.json == {"count": 1, "value": [mine]}
    assert empty.json == {"count": 0, "value": []}
    assert actions.state.statistics(scale_set["id"])["totalAssignedJobs"] == 1


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("admin token", 401),
        ("token of another scale set", 401),
        ("expired queue token", 401),
        ("not an array", 400),
    ],
)
async def test_acquire_errors(
    actions: ActionsEmulator, service: Service, case: str, status: int
) -> None:
    scale_set = await service.create_scale_set("arc")
    other = await service.create_scale_set("other")
    session = await service.open_session(scale_set["id"])
    other_session = await service.open_session(other["id"])
    token, body, target = session["messageQueueAccessToken"], [1], scale_set["id"]
    if case == "admin token":
        token = service.token
    elif case == "token of another scale set":
        token = other_session["messageQueueAccessToken"]
    elif case == "expired queue token":
        actions.faults.expire_tokens("message_queue")
    else:
        body = {"ids": [1]}  # type: ignore[assignment]

    reply = await service.call("POST", f"{SCALE_SETS}/{target}/acquirejobs", body=body, token=token)

    assert reply.status == status


async def test_direct_flow_assigns_without_job_available(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(require_acquire=False, long_poll_timeout=0.2) as emulator:
        service = await authenticate(emulator, http)
        _, session = await service.open_scale_set("arc")
        emulator.enqueue_job(labels=["arc"])

        message = (await service.get_message(session)).json

        assert [j["messageType"] for j in job_messages(message)] == ["JobAssigned"]
        assert message["statistics"]["totalAssignedJobs"] == 1


@pytest.mark.parametrize(
    ("labels", "routed_to"),
    [
        (["arc"], "arc"),
        (["ARC"], "arc"),
        (["self-hosted", "gpu"], "gpu"),
        (["gpu", "linux"], "gpu"),
        (["linux"], "gpu"),
        (["windows"], None),
        (["self-hosted"], None),
        ([], None),
    ],
)
async def test_jobs_route_to_the_first_scale_set_with_all_their_labels(
    actions: ActionsEmulator, service: Service, labels: list[str], routed_to: str | None
) -> None:
    names = {}
    for name, extra in (("arc", []), ("gpu", [{"name": "linux"}])):
        created = await service.create_scale_set(
            name, labels=[{"type": "System", "name": name}, *extra]
        )
        names[created["id"]] = name

    job = actions.state.jobs[actions.enqueue_job(labels=labels)]

    assert (names[job.scale_set_id] if job.scale_set_id else None) == routed_to
    assert job.state == ("available" if routed_to else "queued")


async def test_a_queued_job_is_routed_when_its_scale_set_appears(
    actions: ActionsEmulator, service: Service
) -> None:
    request_id = actions.enqueue_job(labels=["late"])

    _, session = await service.open_scale_set("late")

    (job,) = job_messages((await service.get_message(session)).json)
    assert (job["messageType"], job["runnerRequestId"]) == ("JobAvailable", request_id)


async def test_a_new_session_is_offered_jobs_left_available(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    message = (await service.get_message(session)).json
    await service.delete_message(session, message["messageId"])
    await service.on_session("DELETE", session)

    successor = await service.open_session(scale_set["id"])
    offered = (await service.get_message(successor)).json

    assert successor["statistics"]["totalAvailableJobs"] == 1
    assert [(j["messageType"], j["runnerRequestId"]) for j in job_messages(offered)] == [
        ("JobAvailable", request_id)
    ]


async def test_acquirable_jobs_lists_available_jobs_or_answers_204(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set = await service.create_scale_set("arc")
    path = f"{SCALE_SETS}/{scale_set['id']}/acquirablejobs"

    empty = await service.call("GET", path)
    request_id = actions.enqueue_job(labels=["arc"])
    listed = await service.call("GET", path)

    assert (empty.status, empty.text) == (204, "")
    assert listed.status == 200
    assert listed.json["count"] == 1
    job = listed.json["value"][0]
    assert (job["runnerRequestId"], job["messageType"]) == (request_id, "JobAvailable")
    assert job["requestLabels"] == ["arc"]


async def test_cancelling_an_assigned_job_completes_it_as_canceled(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    await service.acquire(session, scale_set["id"], [request_id])

    actions.cancel_job(request_id)
    message = (await service.get_message(session)).json

    assert [j["messageType"] for j in job_messages(message)] == [
        "JobAvailable",
        "JobAssigned",
        "JobCompleted",
    ]
    completed = job_messages(message)[-1]
    assert completed["result"] == "canceled"
    assert completed["runnerAssignTime"] == ZERO
    assert message["statistics"]["totalAssignedJobs"] == 0


async def test_deleting_a_scale_set_requeues_its_jobs(
    actions: ActionsEmulator, service: Service
) -> None:
    first = await service.create_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])

    await service.call("DELETE", f"{SCALE_SETS}/{first['id']}")
    assert actions.state.jobs[request_id].state == "queued"
    second = await service.create_scale_set("arc")

    assert actions.state.jobs[request_id].scale_set_id == second["id"]


async def test_a_reoffered_job_completes_canceled_then_is_offered_again(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    await service.acquire(session, scale_set["id"], [request_id])

    actions.reoffer_job(request_id)
    message = (await service.get_message(session)).json

    assert [(j["messageType"], j.get("result")) for j in job_messages(message)] == [
        ("JobAvailable", None),
        ("JobAssigned", None),
        ("JobCompleted", "canceled"),
        ("JobAvailable", None),
    ]
    assert message["statistics"]["totalAvailableJobs"] == 1
    assert actions.state.jobs[request_id].state == "available"


async def test_the_fourth_reoffer_leaves_the_job_canceled(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    request_id = actions.enqueue_job(labels=["arc"])
    for _ in range(4):
        await service.acquire(session, scale_set["id"], [request_id])
        actions.reoffer_job(request_id)

    job = actions.state.jobs[request_id]
    assert (job.state, job.final_result) == ("completed", "canceled")
    with pytest.raises(ValueError, match="completed"):
        actions.reoffer_job(request_id)
    assert actions.state.statistics(scale_set["id"])["totalAvailableJobs"] == 0


def calls_into_jobs(action: Callable[[], object]) -> int:
    """Python calls in sandbox/actions/state/jobs.py (generator steps included) during
    `action`: a count of the job and runner records it walked."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and frame.f_code.co_filename.endswith("sandbox/actions/state/jobs.py"):
            calls += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls


def online_runners(actions: ActionsEmulator, scale_set_id: int, count: int) -> list[Runner]:
    runners = []
    for index in range(count):
        runner, files = actions.state.generate_jit_config(
            scale_set_id, name=f"runner-{scale_set_id}-{index}", work_folder=""
        )
        actions.state.runner_online(runner.id, files[".credentials"]["Data"]["token"])
        runners.append(runner)
    return runners


async def test_a_runner_coming_online_with_no_job_waiting_walks_no_other_runner(
    actions: ActionsEmulator,
) -> None:
    """Each runner coming online dispatches; walking every registered runner each time made a
    scale-up of N simulated runners cost N x N steps."""
    costs = []
    for name, already in (("few", 5), ("many", 50)):
        scale_set = actions.state.create_scale_set(
            name=name, runner_group_id=1, labels=[], runner_setting={}
        )
        online_runners(actions, scale_set.id, already)
        runner, files = actions.state.generate_jit_config(
            scale_set.id, name=f"{name}-last", work_folder=""
        )
        token = files[".credentials"]["Data"]["token"]
        online = functools.partial(actions.state.runner_online, runner.id, token)
        costs.append(calls_into_jobs(online))

    assert costs[0] == costs[1]


async def test_an_assigned_job_goes_to_the_oldest_idle_runner(actions: ActionsEmulator) -> None:
    scale_set = actions.state.create_scale_set(
        name="arc", runner_group_id=1, labels=[{"name": "arc"}], runner_setting={}
    )
    first, second = online_runners(actions, scale_set.id, 2)
    first.job_id = 4242

    job_id = actions.enqueue_job(labels=["arc"])
    actions.state.acquire_jobs(scale_set.id, [job_id])

    assert actions.state.jobs[job_id].runner_id == second.id
    assert second.job_id == job_id
