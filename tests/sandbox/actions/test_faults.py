"""Fault injection: status codes with counts and rates, Retry-After, latency, empty bodies,
the BOM, and the request log the faults are counted in."""

from __future__ import annotations

import aiohttp
import pytest

from sandbox.actions import ENDPOINTS, ActionsEmulator
from tests.sandbox.actions.wire import SCALE_SETS, Service, registration_token, send

LOOKUP = {"runnerGroupId": "1", "name": "arc"}


async def lookup_status(service: Service) -> int:
    return (await service.call("GET", SCALE_SETS, params=LOOKUP)).status


async def test_a_counted_fault_hits_that_many_requests(
    actions: ActionsEmulator, service: Service
) -> None:
    fault = actions.faults.inject("get_scale_set_by_name", status=503, count=2)

    statuses = [await lookup_status(service) for _ in range(3)]

    assert statuses == [503, 503, 200]
    assert fault.hits == 2
    assert actions.state.count("get_scale_set_by_name", status=503) == 2


async def test_429_carries_retry_after(actions: ActionsEmulator, service: Service) -> None:
    actions.faults.inject("get_scale_set_by_name", status=429, retry_after=2, count=1)

    reply = await service.call("GET", SCALE_SETS, params=LOOKUP)

    assert reply.status == 429
    assert reply.headers["Retry-After"] == "2"
    assert reply.headers["ActivityId"]


@pytest.mark.parametrize(
    ("endpoint", "status", "type_name"),
    [
        ("create_session", 409, "RunnerScaleSetSessionConflictException"),
        ("refresh_session", 404, "RunnerAdminException"),
        ("get_message", 401, "VssUnauthorizedException"),
        ("generate_jit_config", 500, "InjectedFaultException"),
    ],
)
async def test_injected_errors_have_the_service_shape(
    actions: ActionsEmulator, service: Service, endpoint: str, status: int, type_name: str
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    actions.faults.inject(endpoint, status=status)
    sid = scale_set["id"]

    if endpoint == "create_session":
        reply = await service.create_session(sid)
    elif endpoint == "refresh_session":
        reply = await service.on_session("PATCH", session)
    elif endpoint == "get_message":
        reply = await service.get_message(session)
    else:
        reply = await service.generate_jit(sid, "r")

    assert reply.status == status
    assert reply.json["typeName"].endswith(type_name)


async def test_github_endpoint_faults_have_the_github_shape(
    actions: ActionsEmulator, http: aiohttp.ClientSession
) -> None:
    actions.faults.inject("registration_token", status=403, count=1)

    reply = await registration_token(actions, http, actions.add_pat(), "orgs/example-org")

    assert reply.status == 403
    assert set(reply.json) == {"message", "documentation_url"}


async def test_a_rate_hits_a_reproducible_share(actions: ActionsEmulator, service: Service) -> None:
    actions.faults.inject("*", status=500, rate=0.5)

    statuses = [await lookup_status(service) for _ in range(40)]

    assert 5 <= statuses.count(500) <= 35
    async with ActionsEmulator() as twin:
        twin.faults.inject("*", status=500, rate=0.5)
        replay = [500 if twin.faults.pick("get_scale_set_by_name") else 200 for _ in range(40)]
    assert replay == statuses


async def test_an_empty_200_leaves_the_message_queued(
    actions: ActionsEmulator, service: Service
) -> None:
    _, session = await service.open_scale_set("arc")
    actions.enqueue_job(labels=["arc"])
    actions.faults.inject("get_message", empty_body=True, count=1)

    empty = await service.get_message(session)
    real = await service.get_message(session)

    assert (empty.status, empty.text) == (200, "")
    assert real.status == 200
    assert real.json["messageId"] > 0


async def test_latency_slows_a_response_past_a_client_timeout(
    actions: ActionsEmulator, service: Service
) -> None:
    actions.faults.inject("get_scale_set_by_name", latency=5, count=1)
    url = f"{service.url}{SCALE_SETS}"

    with pytest.raises(TimeoutError):
        async with service.http.get(
            url,
            params={**LOOKUP, "api-version": "6.0-preview"},
            headers={"Authorization": f"Bearer {service.token}"},
            timeout=aiohttp.ClientTimeout(total=0.2),
        ):
            pass
    assert await lookup_status(service) == 200


async def test_bom_prefixes_json_bodies(actions: ActionsEmulator, service: Service) -> None:
    actions.faults.bom = True

    async with service.http.get(
        f"{service.url}{SCALE_SETS}",
        params={**LOOKUP, "api-version": "6.0-preview"},
        headers={"Authorization": f"Bearer {service.token}"},
    ) as reply:
        raw = await reply.read()

    assert raw.startswith(b"\xef\xbb\xbf{")


async def test_removed_and_cleared_faults_stop(actions: ActionsEmulator, service: Service) -> None:
    first = actions.faults.inject("get_scale_set_by_name", status=500)
    actions.faults.remove(first)
    after_remove = await lookup_status(service)
    actions.faults.inject("get_scale_set_by_name", status=500)
    actions.faults.clear()

    assert (after_remove, await lookup_status(service)) == (200, 200)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"endpoint": "nope", "status": 500},
        {"endpoint": "get_message", "status": 500, "rate": 1.5},
        {"endpoint": "get_message", "status": 500, "empty_body": True},
    ],
)
def test_bad_faults_are_refused(actions: ActionsEmulator, kwargs: dict[str, object]) -> None:
    endpoint = str(kwargs.pop("endpoint"))
    with pytest.raises(ValueError, match=r"endpoint|rate|empty_body"):
        actions.faults.inject(endpoint, **kwargs)  # type: ignore[arg-type]


async def test_every_endpoint_is_named_in_the_request_log(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set = await service.create_scale_set("arc")
    sid = scale_set["id"]
    session = await service.open_session(sid)
    runner = (await service.generate_jit(sid, "r")).json["runner"]
    job = actions.enqueue_job(labels=["arc"])
    message = (await service.get_message(session)).json
    await service.delete_message(session, message["messageId"])
    await service.acquire(session, sid, [job])
    await service.call("GET", f"{SCALE_SETS}/{sid}/acquirablejobs")
    await service.call("GET", f"{SCALE_SETS}/{sid}")
    await service.call("GET", SCALE_SETS, params=LOOKUP)
    await service.call("PATCH", f"{SCALE_SETS}/{sid}", body={"name": "arc2"})
    await service.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "Default"})
    await service.call("GET", "_apis/distributedtask/pools/0/agents", params={"agentName": "r"})
    await service.call("GET", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    await service.call("DELETE", f"_apis/distributedtask/pools/0/agents/{runner['id']}")
    await service.on_session("PATCH", session)
    await service.on_session("DELETE", session)
    await service.call("DELETE", f"{SCALE_SETS}/{sid}")
    app = actions.add_app()
    await send(
        service.http,
        "POST",
        f"{actions.url}/api/v3/app/installations/{app.installation_id}/access_tokens",
    )

    assert {r.endpoint for r in actions.state.requests} == set(ENDPOINTS)
    assert all(r.endpoint for r in actions.state.requests)
