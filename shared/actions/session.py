"""`MessageSession`: the listener's side of one message session (long poll, ack, acquire).

A session needs eight things of the client that opened it, named by `SessionHost`;
`ActionsClient` is one, and this module never imports it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self

from shared.actions.errors import (
    ActionsError,
    InvalidArgument,
    MessageQueueTokenExpired,
    SessionExpired,
    SessionNotFound,
    UnexpectedResponse,
)
from shared.actions.models import RunnerScaleSetMessage, RunnerScaleSetSession, WireError
from shared.actions.transport import Response, Transport
from shared.actions.urls import API_VERSION, SCALE_SETS, join_url, with_query

log = logging.getLogger("shared.actions")

_MQ_ERRORS: dict[int, type[ActionsError]] = {401: MessageQueueTokenExpired}


class SessionHost(Protocol):
    """What a `MessageSession` uses of the client that opened it, and nothing more.

    The message-queue calls go straight through `transport` (with `long_poll_timeout` for the
    long poll and `secrets` kept out of errors); acquiring jobs is a service call authorised by
    the message-queue token; the session itself is renewed and deleted through the admin side.
    """

    @property
    def transport(self) -> Transport: ...

    @property
    def long_poll_timeout(self) -> float: ...

    @property
    def secrets(self) -> frozenset[str]: ...

    async def refresh_session(
        self, scale_set_id: int, session_id: str
    ) -> RunnerScaleSetSession: ...

    async def delete_session(self, scale_set_id: int, session_id: str) -> None: ...

    async def service_response(
        self, method: str, path: str, *, json_body: Any, token: str
    ) -> Response: ...

    def error_for(
        self, response: Response, *, by_status: Mapping[int, type[ActionsError]]
    ) -> ActionsError: ...

    def envelope(self, response: Response) -> list[Any]: ...


class MessageSession:
    """A live session: the message queue URL and token, renewed transparently.

    A 401 on `get_message`, `delete_message` or `acquire_jobs` refreshes the session (new
    message-queue token) and repeats the call once; a second 401 raises
    MessageQueueTokenExpired. `close()` (or leaving `async with`) deletes the session.
    """

    def __init__(
        self, client: SessionHost, *, scale_set_id: int, session: RunnerScaleSetSession
    ) -> None:
        self._client = client
        self.scale_set_id = scale_set_id
        self._session = session
        self._closed = False
        self._refresh_lock = asyncio.Lock()

    @property
    def session(self) -> RunnerScaleSetSession:
        """The latest session object (replaced by every refresh)."""
        return self._session

    @property
    def session_id(self) -> str:
        return self._session.session_id

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def refresh(self) -> RunnerScaleSetSession:
        """Renew the message-queue token; raises SessionNotFound when the session is gone."""
        self._session = await self._client.refresh_session(self.scale_set_id, self.session_id)
        return self._session

    async def close(self) -> None:
        """Delete the session once; a session the service already forgot counts as deleted."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.delete_session(self.scale_set_id, self.session_id)
        except (SessionNotFound, SessionExpired) as exc:
            log.info("session %s was already gone: %s", self.session_id, exc)

    async def _renewing(self, call: Callable[[str], Awaitable[Response]]) -> Response:
        used = self._token()
        response = await call(used)
        if response.status != 401:
            return response
        async with self._refresh_lock:
            # Concurrent calls refused the same token: only the first refreshes the session.
            if self._token() == used:
                log.info("message queue token rejected; refreshing session %s", self.session_id)
                await self.refresh()
        return await call(self._token())

    def _token(self) -> str:
        return self._session.message_queue_access_token.get_secret_value()

    def _error(self, response: Response) -> ActionsError:
        return self._client.error_for(response, by_status=_MQ_ERRORS)

    async def get_message(
        self, *, last_message_id: int = 0, max_capacity: int
    ) -> RunnerScaleSetMessage | None:
        """Long-poll for the next message after `last_message_id`.

        Returns None when the service has nothing (202), and also for a 204 or an empty 200,
        which the Go client treats as fatal. `max_capacity` (>= 0) tells the service how many
        jobs this scale set can take.
        """
        if max_capacity < 0:
            raise InvalidArgument("max_capacity must not be negative")

        async def call(token: str) -> Response:
            url = self._session.message_queue_url
            if last_message_id > 0:
                url = with_query(url, {"lastMessageId": str(last_message_id)})
            return await self._client.transport.request(
                "GET",
                url,
                headers={
                    "Accept": f"application/json; api-version={API_VERSION}",
                    "Authorization": f"Bearer {token}",
                    "X-ScaleSetMaxCapacity": str(max_capacity),
                },
                attempt_timeout=self._client.long_poll_timeout,
                secrets=self._client.secrets,
            )

        response = await self._renewing(call)
        if response.status in (202, 204):
            return None
        if not response.ok:
            raise self._error(response)
        if response.empty:
            log.warning("GET message answered 200 with an empty body; treated as no message")
            return None
        payload = response.json()
        try:
            return RunnerScaleSetMessage.from_wire(payload)
        except WireError as exc:
            raise UnexpectedResponse(f"GET message: undecodable message ({exc})") from None

    async def delete_message(self, message_id: int) -> None:
        """Acknowledge a message so it is not delivered again (any 2xx counts)."""

        async def call(token: str) -> Response:
            return await self._client.transport.request(
                "DELETE",
                join_url(self._session.message_queue_url, str(message_id)),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                secrets=self._client.secrets,
            )

        response = await self._renewing(call)
        if not response.ok:
            raise self._error(response)

    async def acquire_jobs(self, request_ids: Sequence[int]) -> list[int]:
        """Ask for the `runnerRequestId`s offered by JobAvailable; returns those acquired.

        An admin-style call (service URL, `api-version`) authorised by the message-queue token.
        """
        ids = [int(i) for i in request_ids]

        async def call(token: str) -> Response:
            return await self._client.service_response(
                "POST", f"{SCALE_SETS}/{self.scale_set_id}/acquirejobs", json_body=ids, token=token
            )

        response = await self._renewing(call)
        if not response.ok:
            raise self._error(response)
        acquired = self._client.envelope(response)
        if not all(isinstance(item, int) for item in acquired):
            raise UnexpectedResponse("POST acquirejobs: the acquired ids are not all integers")
        return acquired
