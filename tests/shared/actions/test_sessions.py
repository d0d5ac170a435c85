"""Message sessions: create (409), refresh, delete, long poll, ack, acquire, MQ token renewal."""

from __future__ import annotations

import asyncio
import json

import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsError,
    ActionsServerError,
    InvalidArgument,
    JobAssigned,
    JobAvailable,
    MessageQueueTokenExpired,
    MessageSession,
    RunnerScaleSet,
    ScaleSetNotFound,
    SessionConflict,
    SessionNotFound,
    UnexpectedResponse,
)

from .conftest import RecordedSleeps, endpoints


async def _mq_call(session: MessageSession, endpoint: str, *, message_id: int = 1) -> object:
    """One message-queue operation by its emulator endpoint name."""
    if endpoint == "get_message":
        return await session.get_message(max_capacity=1)
    if endpoint == "delete_message":
        await session.delete_message(message_id)
        return None
    return await session.acquire_jobs([message_id])


async def _session_call(
    client: ActionsClient, endpoint: str, *, scale_set_id: int, session_id: str
) -> object:
    if endpoint == "create_session":
        return await client.create_session(scale_set_id, owner="x")
    if endpoint == "refresh_session":
        return await client.refresh_session(scale_set_id, session_id)
    await client.delete_session(scale_set_id, session_id)
    return None


async def test_create_session_decodes_everything(
    actions: ActionsEmulator, session: MessageSession, scale_set: RunnerScaleSet
) -> None:
    live = actions.state.sessions[session.session_id]
    assert session.session.owner_name == "listener-0"
    assert session.session.message_queue_url.startswith(actions.url + "/broker/message?")
    assert session.session.message_queue_access_token.get_secret_value() == (
        live.message_queue_token
    )
    assert session.session.statistics is not None
    assert session.session.runner_scale_set is not None
    assert session.session.runner_scale_set.id == scale_set.id


async def test_create_session_body(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    created = await client.create_session(scale_set.id, owner="pod-abc")
    assert created.owner_name == "pod-abc"
    await client.delete_session(scale_set.id, created.session_id)


async def test_second_session_conflicts(
    client: ActionsClient, scale_set: RunnerScaleSet, session: MessageSession
) -> None:
    with pytest.raises(SessionConflict, match="already has an active session") as caught:
        await client.create_session(scale_set.id, owner="listener-1")
    assert caught.value.status == 409


async def test_conflict_is_not_retried(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    actions.faults.inject("create_session", status=409, body="{}")
    with pytest.raises(SessionConflict):
        await client.create_session(scale_set.id, owner="x")
    assert actions.state.count("create_session") == 1


async def test_session_after_delete_is_allowed(
    client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    first = await client.open_message_session(scale_set.id, owner="a")
    await first.close()
    async with await client.open_message_session(scale_set.id, owner="b") as second:
        assert second.session_id != first.session_id


async def test_session_for_unknown_scale_set(client: ActionsClient) -> None:
    with pytest.raises(ScaleSetNotFound):
        await client.create_session(999, owner="x")


async def test_create_session_400_exposes_exception(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    actions.faults.inject(
        "create_session",
        status=400,
        body=json.dumps({"typeName": "X.BadSessionException", "message": "nope"}),
    )
    with pytest.raises(ActionsError, match="status=400") as caught:
        await client.create_session(scale_set.id, owner="x")
    assert (caught.value.type_name, caught.value.activity_id != "") == (
        "X.BadSessionException",
        True,
    )


@pytest.mark.parametrize("endpoint", ["create_session", "refresh_session", "delete_session"])
async def test_session_calls_retry_500(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    endpoint: str,
) -> None:
    created = await client.create_session(scale_set.id, owner="x")
    fault = actions.faults.inject(endpoint, status=500)
    with pytest.raises(ActionsServerError):
        await _session_call(
            client, endpoint, scale_set_id=scale_set.id, session_id=created.session_id
        )
    assert fault.hits == 5


async def test_refresh_replaces_token(actions: ActionsEmulator, session: MessageSession) -> None:
    before = session.session.message_queue_access_token.get_secret_value()
    await session.refresh()
    after = session.session.message_queue_access_token.get_secret_value()
    assert after != before
    assert actions.state.sessions[session.session_id].message_queue_token == after


async def test_refresh_of_gone_session(actions: ActionsEmulator, session: MessageSession) -> None:
    actions.faults.evict_sessions()
    with pytest.raises(SessionNotFound, match="RunnerAdminException"):
        await session.refresh()


async def test_close_deletes_once(actions: ActionsEmulator, session: MessageSession) -> None:
    await session.close()
    await session.close()
    assert session.session_id not in actions.state.sessions
    assert actions.state.count("delete_session") == 1
    assert actions.state.requests[-1].status == 204


async def test_close_of_evicted_session_is_quiet(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.faults.evict_sessions()
    await session.close()
    assert actions.state.requests[-1].status == 404


async def test_no_message_is_none(actions: ActionsEmulator, session: MessageSession) -> None:
    assert await session.get_message(max_capacity=3) is None
    assert actions.state.requests[-1].status == 202


async def test_get_message_headers_and_query(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    await session.get_message(max_capacity=0)
    first = actions.state.requests[-1]
    await session.get_message(last_message_id=1, max_capacity=7)
    second = actions.state.requests[-1]
    assert first.query == {"sessionId": session.session_id}
    assert second.query == {"sessionId": session.session_id, "lastMessageId": "1"}
    assert (first.headers["X-ScaleSetMaxCapacity"], second.headers["X-ScaleSetMaxCapacity"]) == (
        "0",
        "7",
    )
    assert first.headers["Accept"] == "application/json; api-version=6.0-preview"
    assert "Content-Type" not in first.headers
    assert "api-version" not in second.query


async def test_negative_capacity_sends_nothing(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    with pytest.raises(InvalidArgument):
        await session.get_message(max_capacity=-1)
    assert "get_message" not in endpoints(actions)


async def test_message_ack_and_acquire(actions: ActionsEmulator, session: MessageSession) -> None:
    first = actions.enqueue_job(labels=["arc"])
    second = actions.enqueue_job(labels=["arc"])
    message = await session.get_message(max_capacity=5)
    assert message is not None
    assert message.statistics is not None
    assert message.statistics.total_available_jobs == 2
    await session.delete_message(message.message_id)
    assert actions.state.requests[-1].path == f"/broker/message/{message.message_id}"
    assert actions.state.requests[-1].query == {"sessionId": session.session_id}
    ids = [j.runner_request_id for j in message.jobs if isinstance(j, JobAvailable)]
    assert ids == [first, second]
    assert await session.acquire_jobs(ids) == [first, second]
    assigned = await session.get_message(last_message_id=message.message_id, max_capacity=5)
    assert assigned is not None
    assert [j.runner_request_id for j in assigned.jobs if isinstance(j, JobAssigned)] == ids
    assert assigned.statistics is not None
    assert assigned.statistics.total_assigned_jobs == 2


async def test_acquire_uses_mq_token_and_api_version(
    actions: ActionsEmulator, session: MessageSession, scale_set: RunnerScaleSet
) -> None:
    assert await session.acquire_jobs([]) == []
    record = actions.state.requests[-1]
    assert record.path == f"/tenant/123/_apis/runtime/runnerscalesets/{scale_set.id}/acquirejobs"
    assert record.query == {"api-version": "6.0-preview"}
    assert record.status == 200


async def test_unacked_message_is_redelivered(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.enqueue_job(labels=["arc"])
    first = await session.get_message(max_capacity=1)
    again = await session.get_message(max_capacity=1)
    assert first is not None
    assert again is not None
    assert again.message_id == first.message_id


@pytest.mark.parametrize(
    ("endpoint", "success"), [("get_message", 200), ("delete_message", 204), ("acquire_jobs", 200)]
)
async def test_mq_401_refreshes_session_and_retries_once(
    actions: ActionsEmulator, session: MessageSession, endpoint: str, success: int
) -> None:
    request_id = actions.enqueue_job(labels=["arc"])
    message = await session.get_message(max_capacity=1)
    assert message is not None
    actions.faults.expire_tokens("message_queue")
    mark = len(actions.state.requests)
    target = request_id if endpoint == "acquire_jobs" else message.message_id
    await _mq_call(session, endpoint, message_id=target)
    assert [(r.endpoint, r.status) for r in actions.state.requests[mark:]] == [
        (endpoint, 401),
        ("refresh_session", 200),
        (endpoint, success),
    ]


@pytest.mark.parametrize("endpoint", ["get_message", "delete_message", "acquire_jobs"])
async def test_mq_401_twice_is_token_expired(
    actions: ActionsEmulator, session: MessageSession, endpoint: str
) -> None:
    actions.faults.inject(endpoint, status=401)
    mark = len(actions.state.requests)
    with pytest.raises(MessageQueueTokenExpired):
        await _mq_call(session, endpoint)
    assert endpoints(actions, mark) == [endpoint, "refresh_session", endpoint]


async def test_mq_401_with_gone_session_is_session_not_found(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.faults.evict_sessions()
    with pytest.raises(SessionNotFound):
        await session.get_message(max_capacity=1)


@pytest.mark.parametrize(
    ("fault", "detail"),
    [
        ({"status": 404, "body": ""}, "unknown error"),
        ({"status": 400, "body": "capacity error", "content_type": "text/plain"}, "capacity error"),
    ],
)
@pytest.mark.parametrize("endpoint", ["get_message", "delete_message", "acquire_jobs"])
async def test_mq_errors(
    actions: ActionsEmulator,
    session: MessageSession,
    endpoint: str,
    fault: dict[str, object],
    detail: str,
) -> None:
    actions.faults.inject(endpoint, **fault)  # type: ignore[arg-type]
    with pytest.raises(ActionsError, match=f"status={fault['status']}.*{detail}"):
        await _mq_call(session, endpoint)


@pytest.mark.parametrize("endpoint", ["get_message", "delete_message", "acquire_jobs"])
async def test_mq_503_retried_then_gives_up(
    actions: ActionsEmulator,
    session: MessageSession,
    sleeps: RecordedSleeps,
    endpoint: str,
) -> None:
    fault = actions.faults.inject(endpoint, status=503)
    with pytest.raises(ActionsServerError):
        await _mq_call(session, endpoint)
    assert fault.hits == 5
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]


async def test_empty_200_is_no_message(
    actions: ActionsEmulator, session: MessageSession, caplog: pytest.LogCaptureFixture
) -> None:
    actions.faults.inject("get_message", empty_body=True, count=1)
    assert await session.get_message(max_capacity=1) is None
    assert "empty body" in caplog.text


async def test_204_is_no_message(actions: ActionsEmulator, session: MessageSession) -> None:
    actions.faults.inject("get_message", status=204, body="", count=1)
    assert await session.get_message(max_capacity=1) is None


async def test_200_ack_is_accepted(actions: ActionsEmulator, session: MessageSession) -> None:
    actions.faults.inject("delete_message", status=200, body="", count=1)
    await session.delete_message(1)


async def test_undecodable_message_is_unexpected_response(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.faults.inject("get_message", status=200, body='{"messageType": 3}', count=1)
    with pytest.raises(UnexpectedResponse, match="undecodable message"):
        await session.get_message(max_capacity=1)


async def test_unknown_message_type_is_returned_without_jobs(
    actions: ActionsEmulator, session: MessageSession, caplog: pytest.LogCaptureFixture
) -> None:
    body = {"messageId": 9, "messageType": "Surprise", "body": "[]", "statistics": {}, "new": 1}
    actions.faults.inject("get_message", status=200, body=json.dumps(body), count=1)
    message = await session.get_message(max_capacity=1)
    assert message is not None
    assert (message.message_id, message.jobs) == (9, [])
    assert "Surprise" in caplog.text


async def test_bom_is_stripped(actions: ActionsEmulator, session: MessageSession) -> None:
    actions.faults.bom = True
    actions.enqueue_job(labels=["arc"])
    message = await session.get_message(max_capacity=1)
    assert message is not None
    assert len(message.jobs) == 1
    await session.refresh()


async def test_acquire_empty_body_is_empty(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.faults.inject("acquire_jobs", empty_body=True, count=1)
    assert await session.acquire_jobs([1]) == []


async def test_acquire_500_is_error(actions: ActionsEmulator, session: MessageSession) -> None:
    actions.faults.inject("acquire_jobs", status=500)
    with pytest.raises(ActionsServerError):
        await session.acquire_jobs([1])


async def test_concurrent_401s_refresh_the_session_once(
    actions: ActionsEmulator, session: MessageSession
) -> None:
    actions.faults.expire_tokens("message_queue")
    assert await asyncio.gather(*(session.acquire_jobs([]) for _ in range(4))) == [[]] * 4
    assert actions.state.count("refresh_session") == 1
