"""Message sessions (create, refresh, delete) and the message queue (long poll, ack)
(docs/sandbox-actions.md#service-behaviour)."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import pytest

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import SCALE_SETS, Service, authenticate, job_messages, send


async def test_create_answers_the_whole_session(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")

    reply = await service.create_session(scale_set["id"], owner="pod-1")

    assert reply.status == 200
    session = reply.json
    uuid.UUID(session["sessionId"])
    assert session["ownerName"] == "pod-1"
    assert session["runnerScaleSet"]["id"] == scale_set["id"]
    assert session["messageQueueUrl"].startswith("http://127.0.0.1:")
    assert session["messageQueueAccessToken"]
    assert session["statistics"]["totalAssignedJobs"] == 0


async def test_second_session_conflicts_until_the_first_is_deleted(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")
    first = await service.open_session(scale_set["id"])

    conflict = await service.create_session(scale_set["id"])
    deleted = await service.on_session("DELETE", first)
    again = await service.create_session(scale_set["id"])

    assert conflict.status == 409
    assert conflict.json == {
        "typeName": "GitHub.Actions.Runtime.WebApi.RunnerScaleSetSessionConflictException",
        "message": "The actions runner scaleset arc already has an active session.",
    }
    assert conflict.headers["ActivityId"]
    assert deleted.status == 204
    assert again.status == 200


async def test_an_expired_session_no_longer_conflicts(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(session_timeout=0) as emulator:
        service = await authenticate(emulator, http)
        scale_set = await service.create_scale_set("arc")
        first = await service.open_session(scale_set["id"])

        second = await service.create_session(scale_set["id"])
        stale = await service.on_session("DELETE", first)

        assert second.status == 200
        assert stale.status == 404


async def test_deleting_an_expired_session_answers_400(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(session_timeout=0) as emulator:
        service = await authenticate(emulator, http)
        _, session = await service.open_scale_set("arc")

        reply = await service.on_session("DELETE", session)

        assert reply.status == 400
        assert reply.json["typeName"].endswith("RunnerScaleSetSessionExpiredException")


@pytest.mark.parametrize(
    ("scale_set_id", "body", "status"),
    [
        (999, {"ownerName": "x"}, 404),
        (None, {"sessionId": "00000000-0000-0000-0000-000000000000"}, 400),
        (None, None, 400),
    ],
)
async def test_create_errors(
    service: Service, scale_set_id: int | None, body: object, status: int
) -> None:
    scale_set = await service.create_scale_set("arc")
    target = scale_set["id"] if scale_set_id is None else scale_set_id

    reply = await service.call("POST", f"{SCALE_SETS}/{target}/sessions", body=body)

    assert reply.status == status
    assert reply.json["typeName"]


async def test_refresh_replaces_the_queue_token(service: Service) -> None:
    _, session = await service.open_scale_set("arc")

    reply = await service.on_session("PATCH", session)

    assert reply.status == 200
    refreshed = reply.json
    assert refreshed["sessionId"] == session["sessionId"]
    assert refreshed["messageQueueAccessToken"] != session["messageQueueAccessToken"]
    assert "statistics" in refreshed
    assert (await service.get_message(session)).status == 401
    assert (await service.get_message(refreshed)).status == 202


async def test_refresh_of_an_unknown_session_answers_404(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")

    reply = await service.call("PATCH", f"{SCALE_SETS}/{scale_set['id']}/sessions/{uuid.uuid4()}")

    assert reply.status == 404
    assert "doesn't exist" in reply.json["message"]


async def test_get_message_answers_202_after_the_long_poll(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")

    reply = await service.get_message(session)

    assert (reply.status, reply.text) == (202, "")
    assert actions.state.requests[-1].query == {"sessionId": session["sessionId"]}


async def test_a_job_wakes_a_waiting_long_poll(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(long_poll_timeout=60) as emulator:
        service = await authenticate(emulator, http)
        _, session = await service.open_scale_set("arc")
        poll = asyncio.create_task(service.get_message(session))
        await emulator.state.wait_for(
            lambda: emulator.state.sessions[session["sessionId"]].polls_in_flight == 1, within=5
        )

        emulator.enqueue_job(labels=["arc"])
        reply = await poll

        assert reply.status == 200
        assert reply.json["messageType"] == "RunnerScaleSetJobMessages"
        assert [m["messageType"] for m in job_messages(reply.json)] == ["JobAvailable"]


async def test_stopping_the_emulator_ends_a_long_poll_with_202(
    http: aiohttp.ClientSession,
) -> None:
    emulator = ActionsEmulator(long_poll_timeout=60)
    await emulator.start()
    service = await authenticate(emulator, http)
    _, session = await service.open_scale_set("arc")
    poll = asyncio.create_task(service.get_message(session))
    await emulator.state.wait_for(
        lambda: emulator.state.sessions[session["sessionId"]].polls_in_flight == 1, within=5
    )

    await emulator.stop()

    assert (await poll).status == 202


async def test_last_message_id_acknowledges_and_redelivery_repeats(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])

    first = (await service.get_message(session)).json
    repeated = (await service.get_message(session)).json
    actions.enqueue_job(labels=["arc"])
    after = (await service.get_message(session, last_message_id=first["messageId"])).json
    past_all = await service.get_message(session, last_message_id=after["messageId"])

    assert repeated == first
    assert after["messageId"] > first["messageId"]
    assert job_messages(after)[0]["runnerRequestId"] != job_messages(first)[0]["runnerRequestId"]
    assert past_all.status == 202


async def test_delete_message_acknowledges_it(actions: ActionsEmulator, service: Service) -> None:
    _, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])
    message = (await service.get_message(session)).json

    deleted = await service.delete_message(session, message["messageId"])
    again = await service.delete_message(session, message["messageId"])

    assert (deleted.status, deleted.text) == (204, "")
    assert again.status == 204
    assert (await service.get_message(session)).status == 202
    record = actions.state.requests[-2]
    assert record.path == f"/broker/message/{message['messageId']}"
    assert record.query == {"sessionId": session["sessionId"]}


async def test_unacked_messages_survive_a_new_session(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])
    message = (await service.get_message(session)).json
    await service.on_session("DELETE", session)

    successor = await service.open_session(scale_set["id"])
    redelivered = (await service.get_message(successor)).json

    assert redelivered["messageId"] == message["messageId"]


async def test_messages_carry_at_most_50_job_messages(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    for _ in range(60):
        actions.enqueue_job(labels=["arc"])

    first = (await service.get_message(session)).json
    second = (await service.get_message(session, last_message_id=first["messageId"])).json

    assert len(job_messages(first)) == 50
    assert len(job_messages(second)) == 10
    assert first["statistics"]["totalAvailableJobs"] == 60


@pytest.mark.parametrize(
    ("capacity", "status"), [("0", 202), ("2147483647", 202), ("-1", 400), ("many", 400)]
)
async def test_max_capacity_header_is_validated_and_recorded(
    actions: ActionsEmulator, service: Service, capacity: str, status: int
) -> None:
    _, session = await service.open_scale_set("arc")

    async with service.http.get(
        session["messageQueueUrl"],
        headers={
            "Authorization": f"Bearer {session['messageQueueAccessToken']}",
            "X-ScaleSetMaxCapacity": capacity,
        },
    ) as reply:
        assert reply.status == status
        if status == 400:
            assert reply.content_type == "text/plain"
    if status == 202:
        assert actions.state.sessions[session["sessionId"]].max_capacity == int(capacity)


@pytest.mark.parametrize("case", ["no token", "admin token", "expired", "evicted", "other session"])
async def test_queue_refuses_bad_tokens_with_401(
    actions: ActionsEmulator, service: Service, case: str
) -> None:
    _, session = await service.open_scale_set("arc")
    token = session["messageQueueAccessToken"]
    url = session["messageQueueUrl"]
    if case == "no token":
        token = ""
    elif case == "admin token":
        token = service.token
    elif case == "expired":
        actions.faults.expire_tokens("message_queue")
    elif case == "evicted":
        actions.faults.evict_sessions()
    elif case == "other session":
        url = url.replace(session["sessionId"], str(uuid.uuid4()))

    reply = await send(service.http, "GET", url, token=token)

    assert reply.status == 401


async def test_eviction_makes_the_refresh_answer_404(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    actions.faults.evict_sessions(scale_set["id"])

    polled = await service.get_message(session)
    refreshed = await service.on_session("PATCH", session)

    assert polled.status == 401
    assert refreshed.status == 404


async def test_expired_queue_token_is_recovered_by_refresh(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])
    actions.faults.expire_tokens("message_queue")

    expired = await service.get_message(session)
    refreshed = await service.on_session("PATCH", session)
    retried = await service.get_message(refreshed.json)

    assert expired.status == 401
    assert retried.status == 200


async def test_an_expired_session_refuses_its_queue_token(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(session_timeout=0) as emulator:
        service = await authenticate(emulator, http)
        _, session = await service.open_scale_set("arc")

        reply = await service.get_message(session)

        assert reply.status == 401
        assert emulator.state.sessions == {}
