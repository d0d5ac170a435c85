"""The token chain: PAT and App credentials, registration, admin token lifetime and renewal."""

from __future__ import annotations

import asyncio
import json

import jwt
import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    AuthenticationFailed,
    GitHubApp,
    PersonalAccessToken,
    TokenExpired,
)

from .conftest import ClientFactory, RecordedSleeps, endpoints

CHAIN = ["registration_token", "runner_registration"]


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _app_client(gh: ActionsEmulator, make_client: ClientFactory) -> ActionsClient:
    app = gh.add_app()
    return make_client(
        credentials=GitHubApp(
            client_id=str(app.app_id),
            installation_id=app.installation_id,
            private_key=app.private_key_pem,
        )
    )


async def test_pat_chain_then_admin_call(actions: ActionsEmulator, client: ActionsClient) -> None:
    await client.get_runner_group_by_name("default")
    assert endpoints(actions) == [*CHAIN, "get_runner_group"]
    assert client.service_url == actions.url + "/tenant/123/"


async def test_app_chain_fetches_installation_token(
    actions: ActionsEmulator, make_client: ClientFactory
) -> None:
    client = _app_client(actions, make_client)
    await client.get_runner_group_by_name("default")
    assert endpoints(actions) == ["access_token", *CHAIN, "get_runner_group"]


async def test_app_with_unknown_key_fails_authentication(
    actions: ActionsEmulator, make_client: ClientFactory
) -> None:
    app = actions.add_app()
    other = actions.add_app()
    client = make_client(
        credentials=GitHubApp(
            client_id=str(app.app_id),
            installation_id=app.installation_id,
            private_key=other.private_key_pem,
        )
    )
    with pytest.raises(AuthenticationFailed) as caught:
        await client.get_runner_group_by_name("default")
    assert caught.value.status == 401
    assert endpoints(actions) == ["access_token"]


async def test_unknown_pat_fails_authentication(
    actions: ActionsEmulator, make_client: ClientFactory
) -> None:
    client = make_client(credentials=PersonalAccessToken("ghp_notknowntotheemulator0000"))
    with pytest.raises(AuthenticationFailed, match="Bad credentials"):
        await client.get_runner_group_by_name("default")
    assert endpoints(actions) == ["registration_token"]


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"org": "acme"}, "/api/v3/orgs/acme/actions/runners/registration-token"),
        (
            {"org": "acme", "repo": "app"},
            "/api/v3/repos/acme/app/actions/runners/registration-token",
        ),
        ({"enterprise": "big"}, "/api/v3/enterprises/big/actions/runners/registration-token"),
    ],
)
async def test_registration_token_per_scope(
    actions: ActionsEmulator, make_client: ClientFactory, kwargs: dict[str, str], path: str
) -> None:
    client = make_client(config_url=actions.config_url(**kwargs))
    await client.get_runner_group_by_name("default")
    assert actions.state.requests[0].path == path


async def test_token_chain_headers(actions: ActionsEmulator, make_client: ClientFactory) -> None:
    client = _app_client(actions, make_client)
    await client.get_runner_group_by_name("default")
    content_types = [r.headers.get("Content-Type") for r in actions.state.requests[:3]]
    assert content_types == [
        "application/vnd.github+json",
        "application/vnd.github.v3+json",
        "application/json",
    ]
    agent = json.loads(actions.state.requests[0].headers["User-Agent"])
    assert agent["kind"] == "scaleset"


async def test_valid_admin_token_is_reused(actions: ActionsEmulator, client: ActionsClient) -> None:
    for _ in range(3):
        await client.get_runner_group_by_name("default")
    assert endpoints(actions).count("runner_registration") == 1


@pytest.mark.parametrize(("left", "renewed"), [(59.0, True), (61.0, False)])
async def test_admin_token_renewed_within_60s_of_expiry(
    actions: ActionsEmulator, make_client: ClientFactory, left: float, renewed: bool
) -> None:
    clock = FakeClock(0.0)
    client = make_client(clock=clock)
    clock.now = 1.0e9  # any time: the client reads `exp` and compares with its own clock
    await client.get_runner_group_by_name("default")
    expiry = client.admin_token_expiry
    assert expiry is not None
    clock.now = expiry - left
    await client.get_runner_group_by_name("default")
    assert endpoints(actions).count("runner_registration") == (2 if renewed else 1)


async def test_admin_token_expiry_read_from_jwt(client: ActionsClient) -> None:
    await client.get_runner_group_by_name("default")
    token = next(s for s in client.secrets if s.count(".") == 2 and s.startswith("eyJ"))
    claims = jwt.decode(token, options={"verify_signature": False})
    assert client.admin_token_expiry == claims["exp"]


async def test_failed_renewal_keeps_old_token_and_reports_body(
    actions: ActionsEmulator, make_client: ClientFactory
) -> None:
    clock = FakeClock(0.0)
    client = make_client(clock=clock)
    await client.get_runner_group_by_name("default")
    expiry, url = client.admin_token_expiry, client.service_url
    assert expiry is not None
    clock.now = expiry - 30
    actions.faults.inject(
        "runner_registration", status=401, body='{"message":"registration refused"}'
    )
    with pytest.raises(AuthenticationFailed, match="registration refused") as caught:
        await client.get_runner_group_by_name("default")
    assert caught.value.status == 401
    assert (client.admin_token_expiry, client.service_url) == (expiry, url)


async def test_runner_registration_retries_401_until_accepted(
    actions: ActionsEmulator, client: ActionsClient, sleeps: RecordedSleeps
) -> None:
    fault = actions.faults.inject("runner_registration", status=401, count=4)
    await client.get_runner_group_by_name("default")
    assert fault.hits == 4
    assert actions.state.count("runner_registration", status=200) == 1
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]
    assert client.service_url


async def test_runner_registration_retries_403(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    fault = actions.faults.inject("runner_registration", status=403, count=2)
    await client.get_runner_group_by_name("default")
    assert fault.hits == 2


async def test_registration_token_401_is_not_retried(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    fault = actions.faults.inject("registration_token", status=401)
    with pytest.raises(AuthenticationFailed):
        await client.get_runner_group_by_name("default")
    assert fault.hits == 1


async def test_revoked_admin_token_is_renewed_once(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    await client.get_runner_group_by_name("default")
    actions.faults.expire_tokens("admin")
    mark = len(actions.state.requests)
    await client.get_runner_group_by_name("default")
    assert endpoints(actions, mark) == ["get_runner_group", *CHAIN, "get_runner_group"]


async def test_admin_401_after_renewal_is_token_expired(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    await client.get_runner_group_by_name("default")
    actions.faults.inject("get_runner_group", status=401)
    mark = len(actions.state.requests)
    with pytest.raises(TokenExpired):
        await client.get_runner_group_by_name("default")
    assert endpoints(actions, mark) == ["get_runner_group", *CHAIN, "get_runner_group"]


async def test_concurrent_401s_renew_the_admin_token_once(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    await client.get_runner_group_by_name("default")
    actions.faults.expire_tokens("admin")
    await asyncio.gather(*(client.get_runner_by_name(f"r{i}") for i in range(4)))
    assert actions.state.count("runner_registration") == 2
    assert actions.state.count("get_runner_by_name", status=200) == 4
