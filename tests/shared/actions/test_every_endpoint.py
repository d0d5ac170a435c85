"""One table over every endpoint: 503 is tried five times and the error names method and URL."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import pytest

from sandbox.actions import ENDPOINTS, ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsError,
    ActionsServerError,
    MessageSession,
    RunnerScaleSet,
    UnexpectedResponse,
)

Call = Callable[[ActionsClient, MessageSession, int], Awaitable[object]]

CALLS: dict[str, tuple[str, Call]] = {
    "get_scale_set_by_name": (
        "GET",
        lambda c, s, i: c.get_runner_scale_set(runner_group_id=1, name="arc"),
    ),
    "get_scale_set": ("GET", lambda c, s, i: c.get_runner_scale_set_by_id(i)),
    "create_scale_set": (
        "POST",
        lambda c, s, i: c.create_runner_scale_set(RunnerScaleSet(name="other")),
    ),
    "update_scale_set": (
        "PATCH",
        lambda c, s, i: c.update_runner_scale_set(i, RunnerScaleSet(name="x")),
    ),
    "delete_scale_set": ("DELETE", lambda c, s, i: c.delete_runner_scale_set(i)),
    "get_runner_group": ("GET", lambda c, s, i: c.get_runner_group_by_name("default")),
    "create_session": ("POST", lambda c, s, i: c.create_session(i, owner="y")),
    "refresh_session": ("PATCH", lambda c, s, i: s.refresh()),
    "delete_session": ("DELETE", lambda c, s, i: c.delete_session(i, s.session_id)),
    "get_message": ("GET", lambda c, s, i: s.get_message(max_capacity=1)),
    "delete_message": ("DELETE", lambda c, s, i: s.delete_message(1)),
    "acquire_jobs": ("POST", lambda c, s, i: s.acquire_jobs([1])),
    "acquirable_jobs": ("GET", lambda c, s, i: c.get_acquirable_jobs(i)),
    "generate_jit_config": ("POST", lambda c, s, i: c.generate_jit_runner_config(i, name="r")),
    "get_runner": ("GET", lambda c, s, i: c.get_runner(1)),
    "get_runner_by_name": ("GET", lambda c, s, i: c.get_runner_by_name("r")),
    "remove_runner": ("DELETE", lambda c, s, i: c.remove_runner(1)),
}
TOKEN_CHAIN = {"access_token", "registration_token", "runner_registration"}


def test_table_covers_every_service_endpoint() -> None:
    assert set(CALLS) == set(ENDPOINTS) - TOKEN_CHAIN


@pytest.mark.parametrize("endpoint", sorted(CALLS))
async def test_503_tried_five_times(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
    endpoint: str,
) -> None:
    method, call = CALLS[endpoint]
    fault = actions.faults.inject(endpoint, status=503)
    with pytest.raises(ActionsServerError) as caught:
        await call(client, session, scale_set.id)
    actions.faults.remove(fault)
    assert fault.hits == 5
    assert str(caught.value).startswith(f"{method} {actions.url}/")
    assert "status=503" in str(caught.value)


@pytest.mark.parametrize(
    "endpoint",
    ["get_scale_set", "create_scale_set", "update_scale_set", "generate_jit_config", "get_runner"],
)
async def test_unrelated_body_is_unexpected_response(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
    endpoint: str,
) -> None:
    _, call = CALLS[endpoint]
    actions.faults.inject(endpoint, status=200, body="[1, 2]", count=1)
    with pytest.raises(UnexpectedResponse):
        await call(client, session, scale_set.id)


@pytest.mark.parametrize("endpoint", ["get_scale_set_by_name", "get_runner_by_name"])
async def test_non_json_list_is_unexpected_response(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
    endpoint: str,
) -> None:
    _, call = CALLS[endpoint]
    actions.faults.inject(endpoint, status=200, body="<html>", count=1)
    with pytest.raises(UnexpectedResponse, match="not JSON"):
        await call(client, session, scale_set.id)


async def test_api_version_on_every_service_call_and_never_on_the_queue(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
) -> None:
    for endpoint in sorted(CALLS):
        with contextlib.suppress(ActionsError):
            await CALLS[endpoint][1](client, session, scale_set.id)
    served = {r.endpoint for r in actions.state.requests}
    assert set(CALLS) <= served
    for record in actions.state.requests:
        if record.path.startswith("/tenant/123/"):
            assert record.query.get("api-version") == "6.0-preview", record
        else:
            assert "api-version" not in record.query, record
