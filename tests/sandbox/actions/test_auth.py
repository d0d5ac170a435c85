"""The auth chain: PAT or App JWT -> installation token -> registration token -> runner
registration -> Actions service URL and admin token."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import (
    SCALE_SETS,
    Service,
    registration_token,
    runner_registration,
    send,
)


def app_jwt(
    app_id: str, private_key: str | rsa.RSAPrivateKey, *, iat: float | None = None, life: int = 540
) -> str:
    """The JWT the clients build: RS256, iat backdated 60 s, exp = iat + 9 min, iss = app id."""
    issued = int(time.time() - 60 if iat is None else iat)
    claims = {"iat": issued, "exp": issued + life, "iss": app_id}
    return jwt.encode(claims, private_key, algorithm="RS256")


async def installation_token(
    actions: ActionsEmulator, http: aiohttp.ClientSession, token: str, installation_id: int
) -> Any:
    return await send(
        http,
        "POST",
        f"{actions.url}/api/v3/app/installations/{installation_id}/access_tokens",
        token=token,
        headers={"Content-Type": "application/vnd.github+json"},
    )


@pytest.mark.parametrize(
    ("scope", "config_path"),
    [
        ("orgs/example-org", "/example-org"),
        ("repos/example-org/app", "/example-org/app"),
        ("enterprises/acme", "/enterprises/acme"),
    ],
)
async def test_pat_chain_reaches_the_service(
    actions: ActionsEmulator, http: aiohttp.ClientSession, scope: str, config_path: str
) -> None:
    reply = await registration_token(actions, http, actions.add_pat(), scope)
    assert reply.status == 201
    assert set(reply.json) == {"token", "expires_at"}
    assert reply.json["expires_at"].endswith("Z")

    reply = await runner_registration(actions, http, reply.json["token"], actions.url + config_path)
    assert reply.status == 200
    assert reply.json["url"] == f"{actions.url}/tenant/123/"
    claims = jwt.decode(reply.json["token"], options={"verify_signature": False})
    assert claims["exp"] > time.time() + 3000

    service = Service(http=http, url=reply.json["url"], token=reply.json["token"])
    listed = await service.call("GET", SCALE_SETS, params={"name": "none", "runnerGroupId": "1"})
    assert (listed.status, listed.json) == (200, {"count": 0, "value": []})


@pytest.mark.parametrize("issuer", ["app_id", "client_id"])
async def test_app_chain_reaches_the_service(
    actions: ActionsEmulator, http: aiohttp.ClientSession, issuer: str
) -> None:
    app = actions.add_app()
    token = app_jwt(getattr(app, issuer), app.private_key_pem)

    reply = await installation_token(actions, http, token, app.installation_id)
    assert reply.status == 201
    assert reply.json["token"].startswith("ghs_")

    reply = await registration_token(actions, http, reply.json["token"], "orgs/example-org")
    assert reply.status == 201
    reply = await runner_registration(actions, http, reply.json["token"], actions.config_url())
    assert reply.status == 200
    assert reply.json["url"].startswith(actions.url)


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("signed by another key", 401),
        ("expired", 401),
        ("lives longer than 10 minutes", 401),
        ("unknown issuer", 401),
        ("not a JWT", 401),
        ("another installation", 404),
    ],
)
async def test_app_jwt_is_verified(
    actions: ActionsEmulator, http: aiohttp.ClientSession, case: str, status: int
) -> None:
    app = actions.add_app()
    installation_id = app.installation_id
    key: str | rsa.RSAPrivateKey = app.private_key_pem
    kwargs: dict[str, Any] = {}
    app_id = app.app_id
    if case == "signed by another key":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif case == "expired":
        kwargs = {"iat": time.time() - 1200}
    elif case == "lives longer than 10 minutes":
        kwargs = {"life": 3600}
    elif case == "unknown issuer":
        app_id = "999999"
    elif case == "another installation":
        installation_id += 1
    token = "not-a-jwt" if case == "not a JWT" else app_jwt(app_id, key, **kwargs)

    reply = await installation_token(actions, http, token, installation_id)

    assert reply.status == status
    assert "message" in reply.json
    assert actions.state.count("access_token", status=201) == 0


@pytest.mark.parametrize("credential", ["unknown", "expired installation token", ""])
async def test_registration_token_needs_a_valid_credential(
    actions: ActionsEmulator, http: aiohttp.ClientSession, credential: str
) -> None:
    token = credential
    if credential == "expired installation token":
        app = actions.add_app()
        reply = await installation_token(
            actions, http, app_jwt(app.app_id, app.private_key_pem), app.installation_id
        )
        token = reply.json["token"]
        actions.faults.expire_tokens("installation")

    reply = await registration_token(actions, http, token, "orgs/example-org")

    assert reply.status == 401
    assert reply.json["message"] == "Bad credentials"


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("unknown token", 401),
        ("expired token", 401),
        ("token of another org", 403),
        ("url with three segments", 400),
        ("unregister event", 400),
    ],
)
async def test_runner_registration_errors(
    actions: ActionsEmulator, http: aiohttp.ClientSession, case: str, status: int
) -> None:
    reply = await registration_token(actions, http, actions.add_pat(), "orgs/example-org")
    token, url, event = reply.json["token"], actions.config_url(), "register"
    if case == "unknown token":
        token = "nope"
    elif case == "expired token":
        actions.faults.expire_tokens("registration")
    elif case == "token of another org":
        url = actions.config_url(org="other-org")
    elif case == "url with three segments":
        url = actions.url + "/a/b/c"
    elif case == "unregister event":
        event = "remove"

    reply = await send(
        http,
        "POST",
        f"{actions.url}/api/v3/actions/runner-registration",
        token=token,
        scheme="RemoteAuth",
        body={"url": url, "runner_event": event},
    )

    assert reply.status == status
    assert "message" in reply.json


async def test_runner_registration_accepts_a_trailing_slash_and_newline(
    actions: ActionsEmulator, http: aiohttp.ClientSession
) -> None:
    reply = await registration_token(actions, http, actions.add_pat(), "repos/o/r")
    async with http.post(
        f"{actions.url}/api/v3/actions/runner-registration",
        data=f'{{"url":"{actions.url}/o/r/","runner_event":"register"}}\n',
        headers={"Authorization": f"RemoteAuth {reply.json['token']}"},
    ) as response:
        assert response.status == 200


async def test_admin_token_expiry_is_a_401_with_an_exception_body(
    actions: ActionsEmulator, service: Service
) -> None:
    actions.faults.expire_tokens("admin")

    reply = await service.call("GET", SCALE_SETS, params={"name": "x"})

    assert reply.status == 401
    assert reply.json["typeName"].endswith("VssUnauthorizedException")


async def test_admin_token_ttl_is_configurable(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(admin_token_ttl=30) as short:
        service_reply = await registration_token(short, http, short.add_pat(), "orgs/o")
        reply = await runner_registration(
            short, http, service_reply.json["token"], short.config_url(org="o")
        )
        claims = jwt.decode(reply.json["token"], options={"verify_signature": False})
        assert 25 <= claims["exp"] - time.time() <= 30


@pytest.mark.parametrize(
    ("params", "fragment"),
    [({}, "No api-version"), ({"api-version": "1.0"}, "out of range")],
)
async def test_service_calls_need_api_version(
    service: Service, params: dict[str, str], fragment: str
) -> None:
    reply = await service.call("GET", SCALE_SETS, params=params, api_version=False)

    assert reply.status == 400
    assert fragment in reply.json["message"]
    assert "ActivityId" in reply.headers
