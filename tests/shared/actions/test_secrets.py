"""No token, key or JIT config ever reaches a log record or an exception message."""

from __future__ import annotations

import json
import logging

import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsError,
    GitHubApp,
    JobAvailable,
    RunnerScaleSet,
)

from .conftest import ClientFactory


def _secrets(gh: ActionsEmulator, client: ActionsClient, extra: list[str]) -> list[str]:
    """Everything secret that exists at this point of the test."""
    return [*gh.credentials.tokens, *gh.credentials.pats, *client.secrets, *extra]


async def test_full_flow_logs_no_secret(
    actions: ActionsEmulator, make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = actions.add_app()
    client = make_client(
        credentials=GitHubApp(
            client_id=str(app.app_id),
            installation_id=app.installation_id,
            private_key=app.private_key_pem,
        )
    )
    errors: list[str] = []
    made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
    jit = await client.generate_jit_runner_config(made.id, name="runner-1")
    async with await client.open_message_session(made.id, owner="x") as session:
        actions.enqueue_job(labels=["arc"])
        actions.faults.inject("get_message", status=503, count=1)
        actions.faults.expire_tokens("message_queue")
        message = await session.get_message(max_capacity=1)
        assert message is not None
        await session.delete_message(message.message_id)
        await session.acquire_jobs(
            [j.runner_request_id for j in message.jobs if isinstance(j, JobAvailable)]
        )
        actions.faults.inject("acquire_jobs", status=401)
        with pytest.raises(ActionsError) as caught:
            await session.acquire_jobs([1])
        errors.append(str(caught.value))
    actions.faults.expire_tokens("admin")
    await client.get_runner_by_name("runner-1")
    with pytest.raises(ActionsError) as caught:
        await client.generate_jit_runner_config(made.id, name="runner-1")
    errors.append(str(caught.value))
    secrets = _secrets(
        actions, client, [app.private_key_pem, jit.encoded_jit_config.get_secret_value()]
    )
    assert len(secrets) > 8
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "retrying" in logged
    for secret in secrets:
        assert secret not in logged
        assert all(secret not in error for error in errors)


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
async def test_echoed_tokens_are_scrubbed_from_errors(
    actions: ActionsEmulator, client: ActionsClient, content_type: str
) -> None:
    made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
    jit = await client.generate_jit_runner_config(made.id, name="runner-1")
    async with await client.open_message_session(made.id, owner="x") as session:
        echoed = [*client.secrets, jit.encoded_jit_config.get_secret_value()]
        text = "refused: " + " ".join(echoed)
        body = text if content_type == "text/plain" else json.dumps({"message": text})
        actions.faults.inject("get_message", status=400, body=body, content_type=content_type)
        with pytest.raises(ActionsError, match="refused") as caught:
            await session.get_message(max_capacity=1)
    message = str(caught.value)
    for secret in echoed:
        assert secret not in message
    assert actions.url in message


async def test_error_keeps_url_readable(actions: ActionsEmulator, client: ActionsClient) -> None:
    with pytest.raises(ActionsError) as caught:
        await client.get_runner_scale_set_by_id(999)
    assert f"GET {actions.url}/tenant/123/_apis/runtime/runnerscalesets/999?" in str(caught.value)


async def test_what_a_client_keeps_to_scrub_stays_bounded_for_its_life(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    """A controller's client lives as long as the process: it keeps its credentials and the
    tokens in use (with the one each replaced), not every token and JIT config it ever saw."""
    made = await client.create_runner_scale_set(RunnerScaleSet(name="arc", runner_group_id=1))
    for i in range(20):
        await client.generate_jit_runner_config(made.id, name=f"runner-{i}")
    after_runners = client.secrets
    assert client.secrets is after_runners, "one set shared by every request"
    for _ in range(4):
        actions.faults.expire_tokens("admin")
        await client.get_runner_by_name("runner-0")
    # The emulator's issued tokens, oldest first (dicts keep insertion order).
    admin_tokens = [t for t, issued in actions.credentials.tokens.items() if issued.kind == "admin"]
    assert len(admin_tokens) == 5
    assert admin_tokens[-1] in client.secrets
    assert admin_tokens[-2] in client.secrets, "a request sent with it may still be answered"
    assert not any(token in client.secrets for token in admin_tokens[:-2])
    # The PAT, and the registration and admin tokens each with the one it replaced.
    assert len(after_runners) == 3
    assert len(client.secrets) == 5

    session = await client.open_message_session(made.id, owner="x")
    token = session.session.message_queue_access_token.get_secret_value()
    assert token in client.secrets
    await session.close()
    assert token not in client.secrets
