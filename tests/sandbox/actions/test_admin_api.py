"""The admin HTTP API under /_admin/: the same controls as the Python API, for other processes."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import SCALE_SETS, Reply, Service, send


async def admin(
    actions: ActionsEmulator, http: aiohttp.ClientSession, method: str, path: str, body: Any = None
) -> Reply:
    return await send(http, method, f"{actions.url}/_admin/{path}", body=body)


async def test_enqueue_job_routes_it_with_the_given_fields(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set = await service.create_scale_set("arc")

    reply = await admin(
        actions,
        service.http,
        "POST",
        "jobs",
        {"labels": ["arc"], "duration": 2.5, "result": "failed", "repository": "octo/app"},
    )

    assert reply.status == 201
    job = actions.state.jobs[reply.json["runnerRequestId"]]
    assert (job.scale_set_id, job.state) == (scale_set["id"], "available")
    assert (job.duration, job.result, job.repository) == (2.5, "failed", "octo/app")
    assert job.workflow_ref == "octo/app/.github/workflows/ci.yml@refs/heads/main"


@pytest.mark.parametrize(
    "body", [{}, {"labels": "arc"}, {"labels": ["arc"], "duration": "soon"}, [1]]
)
async def test_enqueue_job_refuses_bad_bodies(
    actions: ActionsEmulator, http: aiohttp.ClientSession, body: Any
) -> None:
    reply = await admin(actions, http, "POST", "jobs", body)

    assert reply.status == 400
    assert actions.state.jobs == {}


async def test_cancel_job(actions: ActionsEmulator, http: aiohttp.ClientSession) -> None:
    job = actions.enqueue_job(labels=["arc"])

    cancelled = await admin(actions, http, "POST", f"jobs/{job}/cancel")
    missing = await admin(actions, http, "POST", "jobs/1/cancel")

    assert cancelled.status == 204
    assert actions.state.jobs[job].final_result == "canceled"
    assert missing.status == 404


async def test_state_and_requests_show_what_happened(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])

    state = (await admin(actions, service.http, "GET", "state")).json
    requests = (await admin(actions, service.http, "GET", "requests")).json

    assert [s["name"] for s in state["scaleSets"]] == ["arc"]
    assert state["sessions"][0]["sessionId"] == session["sessionId"]
    assert "messageQueueAccessToken" not in str(state)
    assert session["messageQueueAccessToken"] not in str(state)
    assert [j["state"] for j in state["jobs"]] == ["available"]
    assert state["runnerGroups"][0] == {
        "id": 1,
        "name": "Default",
        "size": 1,
        "isDefaultGroup": True,
    }
    assert [r["endpoint"] for r in requests][-2:] == ["create_scale_set", "create_session"]
    assert all("Authorization" not in r["headers"] for r in requests)


async def test_faults_are_added_listed_and_cleared(
    actions: ActionsEmulator, service: Service
) -> None:
    added = await admin(
        actions,
        service.http,
        "POST",
        "faults",
        {"endpoint": "get_scale_set_by_name", "status": 429, "retryAfter": 3, "count": 1},
    )
    hit = await service.call("GET", SCALE_SETS, params={"name": "x"})
    listed = (await admin(actions, service.http, "GET", "faults")).json
    cleared = await admin(actions, service.http, "DELETE", "faults")

    assert added.status == 201
    assert (hit.status, hit.headers["Retry-After"]) == (429, "3")
    assert listed["faults"][0]["hits"] == 1
    assert cleared.status == 204
    assert actions.faults.active == []


@pytest.mark.parametrize(
    "body", [{"endpoint": "nope", "status": 500}, {"endpoint": "get_message", "rate": 2}]
)
async def test_bad_faults_answer_400(
    actions: ActionsEmulator, http: aiohttp.ClientSession, body: dict[str, Any]
) -> None:
    assert (await admin(actions, http, "POST", "faults", body)).status == 400


async def test_switches_bom_and_runner_crashes(
    actions: ActionsEmulator, http: aiohttp.ClientSession
) -> None:
    reply = await admin(actions, http, "POST", "faults", {"bom": True, "runnerCrashExitCode": 2})

    assert reply.json["bom"] is True
    assert (actions.faults.bom, actions.faults.runner_crash_exit_code) == (True, 2)


async def test_expire_tokens_and_evict_sessions(actions: ActionsEmulator, service: Service) -> None:
    scale_set, session = await service.open_scale_set("arc")

    evicted = await admin(
        actions, service.http, "POST", "sessions/evict", {"runnerScaleSetId": scale_set["id"]}
    )
    expired = await admin(actions, service.http, "POST", "tokens/expire", {"kind": "admin"})
    bad_kind = await admin(actions, service.http, "POST", "tokens/expire", {"kind": "pat"})

    assert evicted.json == {"evicted": 1}
    assert expired.json["expired"] >= 1
    assert bad_kind.status == 400
    assert (await service.get_message(session)).status == 401
    assert (await service.call("GET", SCALE_SETS, params={"name": "x"})).status == 401


async def test_runner_version_switch(actions: ActionsEmulator, http: aiohttp.ClientSession) -> None:
    on = await admin(actions, http, "POST", "runner-version", {"deprecated": True})
    bad = await admin(actions, http, "POST", "runner-version", {"deprecated": "yes"})

    assert on.json == {"deprecated": True}
    assert actions.state.runner_version_deprecated
    assert bad.status == 400


async def test_credentials_and_runner_groups(
    actions: ActionsEmulator, http: aiohttp.ClientSession
) -> None:
    pat = (await admin(actions, http, "POST", "pats")).json["token"]
    app = (await admin(actions, http, "POST", "apps")).json
    group = await admin(actions, http, "POST", "runner-groups", {"name": "blue"})

    assert pat in actions.credentials.pats
    assert app["privateKey"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert app["appId"] in actions.credentials.apps
    assert group.status == 201
    assert actions.state.runner_groups[group.json["id"]].name == "blue"


async def test_admin_requests_stay_out_of_the_request_log(
    actions: ActionsEmulator, http: aiohttp.ClientSession
) -> None:
    await admin(actions, http, "GET", "state")

    assert actions.state.requests == []


async def test_reoffer_job(actions: ActionsEmulator, service: Service) -> None:
    scale_set, session = await service.open_scale_set("arc")
    assigned = actions.enqueue_job(labels=["arc"])
    await service.acquire(session, scale_set["id"], [assigned])
    queued = actions.enqueue_job(labels=["nowhere"])

    reoffered = await admin(actions, service.http, "POST", f"jobs/{assigned}/reoffer")
    not_assigned = await admin(actions, service.http, "POST", f"jobs/{queued}/reoffer")
    missing = await admin(actions, service.http, "POST", "jobs/1/reoffer")

    assert reoffered.status == 204
    assert actions.state.jobs[assigned].reoffers == 1
    assert not_assigned.status == 409
    assert missing.status == 404
