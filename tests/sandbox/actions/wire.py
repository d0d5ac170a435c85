"""Raw HTTP helpers that speak the Actions service's wire format, so tests need no client
library."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from sandbox.actions import ActionsEmulator

API_VERSION = {"api-version": "6.0-preview"}
SCALE_SETS = "_apis/runtime/runnerscalesets"
AGENTS = "_apis/distributedtask/pools/0/agents"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text.removeprefix("\ufeff"))


async def send(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    token: str = "",
    scheme: str = "Bearer",
    body: Any = None,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token:
        all_headers["Authorization"] = f"{scheme} {token}"
    data = None if body is None else json.dumps(body)
    async with http.request(method, url, data=data, params=params, headers=all_headers) as r:
        return Reply(r.status, dict(r.headers), await r.text())


@dataclass
class Service:
    """The Actions service as the auth chain revealed it: base URL and admin token."""

    http: aiohttp.ClientSession
    url: str
    token: str

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        token: str | None = None,
        api_version: bool = True,
    ) -> Reply:
        query = {**(API_VERSION if api_version else {}), **(params or {})}
        return await send(
            self.http,
            method,
            self.url + path,
            token=self.token if token is None else token,
            body=body,
            params=query,
        )

    async def create_scale_set(self, name: str = "arc", **fields: Any) -> dict[str, Any]:
        body = {
            "name": name,
            "runnerGroupId": 1,
            "labels": [{"type": "System", "name": name}],
            "RunnerSetting": {"disableUpdate": True},
            "createdOn": "0001-01-01T00:00:00Z",
            **fields,
        }
        reply = await self.call("POST", SCALE_SETS, body=body)
        assert reply.status == 200, reply.text
        scale_set: dict[str, Any] = reply.json
        return scale_set

    async def create_session(self, scale_set_id: int, owner: str = "listener-0") -> Reply:
        body = {"sessionId": "00000000-0000-0000-0000-000000000000", "ownerName": owner}
        return await self.call("POST", f"{SCALE_SETS}/{scale_set_id}/sessions", body=body)

    async def open_session(self, scale_set_id: int) -> dict[str, Any]:
        reply = await self.create_session(scale_set_id)
        assert reply.status == 200, reply.text
        session: dict[str, Any] = reply.json
        return session

    async def open_scale_set(self, name: str = "arc") -> tuple[dict[str, Any], dict[str, Any]]:
        """A new scale set and a session on it."""
        scale_set = await self.create_scale_set(name)
        return scale_set, await self.open_session(scale_set["id"])

    async def on_session(self, method: str, session: dict[str, Any]) -> Reply:
        """PATCH (refresh) or DELETE a session at the scale set it belongs to."""
        scale_set_id = session["runnerScaleSet"]["id"]
        return await self.call(
            method, f"{SCALE_SETS}/{scale_set_id}/sessions/{session['sessionId']}"
        )

    async def get_message(
        self, session: dict[str, Any], *, last_message_id: int = 0, capacity: int = 10
    ) -> Reply:
        params = {"lastMessageId": str(last_message_id)} if last_message_id else {}
        url = session["messageQueueUrl"]
        async with self.http.get(
            url,
            params=params,
            headers={
                "Accept": "application/json; api-version=6.0-preview",
                "Authorization": f"Bearer {session['messageQueueAccessToken']}",
                "X-ScaleSetMaxCapacity": str(capacity),
            },
        ) as r:
            return Reply(r.status, dict(r.headers), await r.text())

    async def delete_message(self, session: dict[str, Any], message_id: int) -> Reply:
        base, _, query = session["messageQueueUrl"].partition("?")
        return await send(
            self.http,
            "DELETE",
            f"{base}/{message_id}?{query}",
            token=session["messageQueueAccessToken"],
        )

    async def acquire(self, session: dict[str, Any], scale_set_id: int, ids: list[int]) -> Reply:
        return await self.call(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/acquirejobs",
            body=ids,
            token=session["messageQueueAccessToken"],
        )

    async def generate_jit(self, scale_set_id: int, name: str) -> Reply:
        return await self.call(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/generatejitconfig",
            body={"name": name, "workFolder": ""},
        )


def job_messages(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The decoded job messages of a queue message (the body is a JSON string of an array)."""
    decoded: list[dict[str, Any]] = json.loads(message["body"]) if message.get("body") else []
    return decoded


async def registration_token(
    emulator: ActionsEmulator, http: aiohttp.ClientSession, credential: str, scope: str
) -> Reply:
    return await send(
        http,
        "POST",
        f"{emulator.url}/api/v3/{scope}/actions/runners/registration-token",
        token=credential,
        headers={"Content-Type": "application/vnd.github.v3+json"},
    )


async def runner_registration(
    emulator: ActionsEmulator, http: aiohttp.ClientSession, token: str, config_url: str
) -> Reply:
    return await send(
        http,
        "POST",
        f"{emulator.url}/api/v3/actions/runner-registration",
        token=token,
        scheme="RemoteAuth",
        body={"url": config_url, "runner_event": "register"},
    )


async def authenticate(emulator: ActionsEmulator, http: aiohttp.ClientSession) -> Service:
    """PAT -> registration token -> runner registration -> service URL and admin token."""
    reply = await registration_token(emulator, http, emulator.add_pat(), "orgs/example-org")
    assert reply.status == 201, reply.text
    reply = await runner_registration(emulator, http, reply.json["token"], emulator.config_url())
    assert reply.status == 200, reply.text
    return Service(http=http, url=reply.json["url"], token=reply.json["token"])
