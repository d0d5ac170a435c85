"""`ActionsClient`: the token chain and every admin endpoint of the Actions service."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from types import TracebackType
from typing import Any, Self, TypeVar

from shared.actions.config import GitHubConfig, parse_config_url
from shared.actions.credentials import Credentials, GitHubApp, token_expiry
from shared.actions.errors import (
    ActionsError,
    AmbiguousName,
    AuthenticationFailed,
    InvalidArgument,
    RunnerGroupNotFound,
    RunnerNotFound,
    ScaleSetNotFound,
    SessionConflict,
    SessionNotFound,
    UnexpectedResponse,
    error_from_response,
)
from shared.actions.models import (
    AcquirableJob,
    JitRunnerConfig,
    Label,
    RunnerGroup,
    RunnerReference,
    RunnerScaleSet,
    RunnerScaleSetSession,
    WireError,
    WireModel,
)
from shared.actions.session import MessageSession
from shared.actions.transport import (
    ProxySettings,
    Response,
    RetryPolicy,
    SystemInfo,
    Transport,
    ssl_context,
    user_agent,
)
from shared.actions.urls import (
    API_VERSION,
    RUNNER_GROUPS,
    RUNNERS,
    SCALE_SETS,
    join_url,
    with_query,
)
from shared.telemetry.logs import mask
from shared.version import package_version

log = logging.getLogger("shared.actions")

ADMIN_TOKEN_MARGIN = 60.0
"""Seconds before its `exp` at which the admin token is renewed ahead of a request."""
RECENT_TOKENS = 2
"""Tokens kept out of errors and logs per kind: the one in use and the one it replaced."""
NIL_SESSION_ID = "00000000-0000-0000-0000-000000000000"

ModelT = TypeVar("ModelT", bound=WireModel)


class ActionsClient:
    """Client of GitHub's runner endpoints and the Actions service for one configuration URL.

    Use as `async with ActionsClient(...) as client:` or call `aclose()`. The admin token is
    fetched on the first service call and renewed before any call made within 60 s of its
    expiry, and once when the service answers 401 to it (that call is then repeated once); a
    failed renewal keeps the previous token and raises. Concurrent calls are safe.
    """

    def __init__(
        self,
        *,
        config_url: str,
        credentials: Credentials,
        system_info: SystemInfo | None = None,
        root_ca_pem: str | bytes | None = None,
        proxy: ProxySettings | None = None,
        retry: RetryPolicy | None = None,
        request_timeout: float = 30.0,
        long_poll_timeout: float = 120.0,
        clock: Callable[[], float] = time.time,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """
        `proxy` defaults to the HTTP(S)_PROXY / NO_PROXY variables of `env` (default
        `os.environ`), which also decides `GITHUB_ACTIONS_FORCE_GHES`. `root_ca_pem` is added to
        the system trust store. `request_timeout` bounds each attempt of every call but the long
        poll, which gets `long_poll_timeout` (the service holds it for about 50 s). `clock`
        returns epoch seconds and decides token expiry.
        """
        environment = os.environ if env is None else env
        self.config: GitHubConfig = parse_config_url(config_url, env=environment)
        self._credentials = credentials
        self._clock = clock
        self._build_version = package_version()
        self._system_info = system_info or SystemInfo()
        self.long_poll_timeout = long_poll_timeout
        self.transport = Transport(
            retry=retry or RetryPolicy(),
            proxy=proxy if proxy is not None else ProxySettings.from_env(environment),
            ssl_ctx=ssl_context(root_ca_pem),
            user_agent=user_agent(self._system_info, build_version=self._build_version),
            request_timeout=request_timeout,
            clock=clock,
        )
        self._service_url = ""
        self._admin_token = ""
        self._admin_expiry: float | None = None
        self._token_lock = asyncio.Lock()
        credential = (
            credentials.private_key if isinstance(credentials, GitHubApp) else credentials.token
        )
        self._standing = frozenset({*self.transport.proxy.passwords, credential})
        # Every log line, span, Event and error message of the process leaves them out too.
        mask(*self._standing)
        self._tokens: dict[str, tuple[str, ...]] = {}
        self._scrubbed: frozenset[str] | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session; the client cannot be used afterwards."""
        await self.transport.aclose()

    @property
    def system_info(self) -> SystemInfo:
        return self._system_info

    def set_system_info(self, info: SystemInfo) -> None:
        """Change the identity sent in the User-Agent (e.g. the scale set id once known)."""
        self._system_info = info
        self.transport.user_agent = user_agent(info, build_version=self._build_version)

    @property
    def service_url(self) -> str:
        """The Actions service base URL of the current admin token ("" before the first call)."""
        return self._service_url

    @property
    def admin_token_expiry(self) -> float | None:
        """Epoch seconds at which the admin token expires (None: never fetched, or no `exp`)."""
        return self._admin_expiry

    def remember_token(self, kind: str, token: str) -> None:
        """Keep `token` out of every error message and log line this client writes, with the
        one of its `kind` it replaces (a request sent with that one may still be answered).
        Older ones are dropped: a client renews its tokens for as long as it lives."""
        kept = self._tokens.get(kind, ())
        if token and token not in kept:
            self._tokens[kind] = (*kept, token)[-RECENT_TOKENS:]
            self._scrubbed = None

    def _forget_tokens(self, kind: str) -> None:
        if self._tokens.pop(kind, None) is not None:
            self._scrubbed = None

    @property
    def secrets(self) -> frozenset[str]:
        """The credentials and the tokens in use, one set shared by every request until a
        token changes."""
        if self._scrubbed is None:
            self._scrubbed = self._standing.union(*self._tokens.values())
        return self._scrubbed

    # --- token chain -----------------------------------------------------------------------

    def _admin_token_fresh(self) -> bool:
        if not self._admin_token:
            return False
        if self._admin_expiry is None:
            return False
        return self._clock() + ADMIN_TOKEN_MARGIN <= self._admin_expiry

    async def ensure_admin_token(self) -> None:
        """Fetch or renew the admin token when missing or within 60 s of expiry."""
        if self._admin_token_fresh():
            return
        async with self._token_lock:
            if self._admin_token_fresh():
                return
            await self._refresh_admin_token()

    async def _rest(
        self,
        path: str,
        *,
        authorization: str,
        content_type: str,
        body: bytes | None = None,
        also_retry: Collection[int] = (),
    ) -> Response:
        url = f"{self.config.api_base}{path}"
        response = await self.transport.request(
            "POST",
            url,
            headers={"Authorization": authorization, "Content-Type": content_type},
            body=body,
            also_retry=also_retry,
            secrets=self.secrets,
        )
        if not response.ok:
            raise self.error_for(response, by_status=_AUTH_FAILURES)
        return response

    def _field(self, response: Response, name: str, *, token_kind: str = "") -> str:
        """The string field `name` of the body; with `token_kind`, remembered as a token of
        that kind."""
        payload = response.json()
        value = payload.get(name) if isinstance(payload, dict) else None
        if not isinstance(value, str) or not value:
            raise UnexpectedResponse(
                f"{response.method} {response.url} answered {response.status} without {name!r}"
            )
        if token_kind:
            self.remember_token(token_kind, value)
        return value

    async def _refresh_admin_token(self) -> None:
        credentials = self._credentials
        if isinstance(credentials, GitHubApp):
            app_jwt = credentials.jwt(now=self._clock())
            self.remember_token("app jwt", app_jwt)
            response = await self._rest(
                f"/app/installations/{credentials.installation_id}/access_tokens",
                authorization=f"Bearer {app_jwt}",
                content_type="application/vnd.github+json",
            )
            github_token = self._field(response, "token", token_kind="installation")
        else:
            github_token = credentials.token
        response = await self._rest(
            self.config.registration_token_path,
            authorization=f"Bearer {github_token}",
            content_type="application/vnd.github.v3+json",
        )
        registration_token = self._field(response, "token", token_kind="registration")
        body = json.dumps({"url": self.config.url, "runner_event": "register"}) + "\n"
        # A freshly minted registration token may not be accepted at once: retry 401/403 too.
        response = await self._rest(
            "/actions/runner-registration",
            authorization=f"RemoteAuth {registration_token}",
            content_type="application/json",
            body=body.encode(),
            also_retry=(401, 403),
        )
        service_url = self._field(response, "url")
        admin_token = self._field(response, "token", token_kind="admin")
        expiry = token_expiry(admin_token)
        if expiry is None:
            log.warning("the admin token has no exp claim; it will be renewed before every call")
        self._service_url, self._admin_token, self._admin_expiry = service_url, admin_token, expiry
        log.info("fetched an admin token for %s (service %s)", self.config.url, service_url)

    # --- admin requests --------------------------------------------------------------------

    def error_for(
        self, response: Response, *, by_status: Mapping[int, type[ActionsError]] | None = None
    ) -> ActionsError:
        """The typed error for a non-2xx `response`, scrubbed of this client's secrets."""
        return error_from_response(
            method=response.method,
            url=response.url,
            status=response.status,
            headers=response.headers,
            body=response.body,
            by_status=by_status,
            secrets=self.secrets,
            attempts=response.attempts,
        )

    async def service_request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        json_body: Any = None,
        by_status: Mapping[int, type[ActionsError]] | None = None,
    ) -> Response:
        """An admin-token call to the Actions service; raises the mapped error on non-2xx."""
        response = await self.service_response(method, path, query=query, json_body=json_body)
        if not response.ok:
            raise self.error_for(response, by_status=by_status)
        return response

    async def service_response(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        json_body: Any = None,
        token: str | None = None,
    ) -> Response:
        """An Actions service call, whatever its status: `path` under the service URL with
        `api-version`, the admin token (renewed if due) unless `token` is given.

        A 401 to the admin token renews it through the whole chain and repeats the call once:
        the service may revoke a token before its `exp` (the Go client stalls on such a token).
        """
        await self.ensure_admin_token()
        body = None if json_body is None else json.dumps(json_body).encode()
        used = token or self._admin_token
        response = await self._send(method, path, query=query, body=body, token=used)
        if response.status != 401 or token is not None:
            return response
        log.info("the Actions service refused the admin token; renewing it once")
        async with self._token_lock:
            # Concurrent calls refused the same token: only the first renews it.
            if self._admin_token == used:
                await self._refresh_admin_token()
        return await self._send(method, path, query=query, body=body, token=self._admin_token)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None,
        body: bytes | None,
        token: str,
    ) -> Response:
        url = with_query(
            join_url(self._service_url, path), {**(query or {}), "api-version": API_VERSION}
        )
        return await self.transport.request(
            method,
            url,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            body=body,
            secrets=self.secrets,
        )

    def decode(self, response: Response, model: type[ModelT]) -> ModelT | None:
        """The body as `model`; None for an empty body or JSON null."""
        if response.empty:
            return None
        payload = response.json()
        if payload is None:
            return None
        try:
            return model.from_wire(payload)
        except WireError as exc:
            raise UnexpectedResponse(
                f"{response.method} {response.url}: unexpected {model.__name__} body ({exc})"
            ) from None

    def envelope(self, response: Response) -> list[Any]:
        """The `value` items of a `{count, value}` envelope, trusting `count` as the Go client
        does; an empty body or null is an empty list."""
        if response.empty:
            return []
        payload = response.json()
        if payload is None:
            return []
        if not isinstance(payload, dict):
            raise UnexpectedResponse(f"{response.method} {response.url}: expected a list envelope")
        count = payload.get("count")
        items = payload.get("value") or []
        if not isinstance(count, int) or not isinstance(items, list):
            raise UnexpectedResponse(f"{response.method} {response.url}: malformed list envelope")
        return items[:count]

    def _list(self, response: Response, model: type[ModelT]) -> list[ModelT]:
        items = self.envelope(response)
        try:
            return [model.from_wire(item) for item in items]
        except WireError as exc:
            raise UnexpectedResponse(
                f"{response.method} {response.url}: unexpected {model.__name__} in list ({exc})"
            ) from None

    def _named(
        self, response: Response, model: type[ModelT], *, kind: str, name: str
    ) -> ModelT | None:
        """The one item of a list looked up by `name`, or None; more than one is ambiguous."""
        found = self._list(response, model)
        if len(found) > 1:
            raise AmbiguousName(f"multiple {kind} found with name {name!r}" + _activity(response))
        return found[0] if found else None

    def _required(self, response: Response, model: type[ModelT]) -> ModelT:
        value = self.decode(response, model)
        if value is None:
            raise UnexpectedResponse(
                f"{response.method} {response.url} answered {response.status} without a "
                f"{model.__name__}"
            )
        return value

    # --- runner scale sets -----------------------------------------------------------------

    async def get_runner_scale_set(
        self, *, runner_group_id: int, name: str
    ) -> RunnerScaleSet | None:
        """The scale set called `name` in the runner group, or None."""
        response = await self.service_request(
            "GET", SCALE_SETS, query={"runnerGroupId": str(runner_group_id), "name": name}
        )
        return self._named(response, RunnerScaleSet, kind="runner scale sets", name=name)

    async def get_runner_scale_set_by_id(self, scale_set_id: int) -> RunnerScaleSet:
        """Raises ScaleSetNotFound when it does not exist."""
        response = await self.service_request(
            "GET", f"{SCALE_SETS}/{scale_set_id}", by_status={404: ScaleSetNotFound}
        )
        found = self.decode(response, RunnerScaleSet)
        if found is None:
            raise ScaleSetNotFound(f"runner scale set {scale_set_id} not found")
        return found

    async def create_runner_scale_set(self, scale_set: RunnerScaleSet) -> RunnerScaleSet:
        """Create it. No labels means one `System` label equal to the name; a label without a
        type gets `System`. Raises InvalidArgument, sending nothing, when both are empty."""
        response = await self.service_request(
            "POST", SCALE_SETS, json_body=_with_default_labels(scale_set).request_body()
        )
        return self._required(response, RunnerScaleSet)

    async def update_runner_scale_set(
        self, scale_set_id: int, scale_set: RunnerScaleSet
    ) -> RunnerScaleSet:
        """PATCH the non-empty fields of `scale_set` (e.g. only `name` or `runner_group_id`)."""
        response = await self.service_request(
            "PATCH",
            f"{SCALE_SETS}/{scale_set_id}",
            json_body=scale_set.request_body(),
            by_status={404: ScaleSetNotFound},
        )
        return self._required(response, RunnerScaleSet)

    async def delete_runner_scale_set(self, scale_set_id: int) -> None:
        await self.service_request(
            "DELETE", f"{SCALE_SETS}/{scale_set_id}", by_status={404: ScaleSetNotFound}
        )

    async def get_runner_group_by_name(self, name: str) -> RunnerGroup:
        """Raises RunnerGroupNotFound when no group has that name."""
        response = await self.service_request(
            "GET",
            RUNNER_GROUPS,
            query={"groupName": name},
            by_status={404: RunnerGroupNotFound},
        )
        found = self._list(response, RunnerGroup)
        if not found:
            raise RunnerGroupNotFound(f"no runner group found with name {name!r}")
        if len(found) > 1:
            raise AmbiguousName(f"multiple runner groups found with name {name!r}")
        return found[0]

    async def get_acquirable_jobs(self, scale_set_id: int) -> list[AcquirableJob]:
        """Jobs waiting for this scale set (legacy endpoint; 204 means none)."""
        response = await self.service_request(
            "GET", f"{SCALE_SETS}/{scale_set_id}/acquirablejobs", by_status={404: ScaleSetNotFound}
        )
        return self._list(response, AcquirableJob)

    async def generate_jit_runner_config(
        self, scale_set_id: int, *, name: str, work_folder: str = ""
    ) -> JitRunnerConfig:
        """Register runner `name` and return its JIT config. Raises RunnerExists when taken."""
        response = await self.service_request(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/generatejitconfig",
            json_body={"name": name, "workFolder": work_folder},
            by_status={404: ScaleSetNotFound},
        )
        config = self._required(response, JitRunnerConfig)
        if not config.encoded_jit_config.get_secret_value():
            raise UnexpectedResponse(
                f"{response.method} {response.url} answered {response.status} without "
                "encodedJITConfig"
            )
        # Not remembered: this client never sends a runner's JIT config, and one remembered per
        # runner for the client's life grew without bound and was copied into every request.
        return config

    # --- runners ---------------------------------------------------------------------------

    async def get_runner(self, runner_id: int) -> RunnerReference:
        """Raises RunnerNotFound when it does not exist."""
        response = await self.service_request(
            "GET", f"{RUNNERS}/{runner_id}", by_status={404: RunnerNotFound}
        )
        found = self.decode(response, RunnerReference)
        if found is None:
            raise RunnerNotFound(f"runner {runner_id} not found")
        return found

    async def get_runner_by_name(self, name: str) -> RunnerReference | None:
        response = await self.service_request("GET", RUNNERS, query={"agentName": name})
        return self._named(response, RunnerReference, kind="runners", name=name)

    async def remove_runner(self, runner_id: int) -> None:
        """Unregister a runner. Raises JobStillRunning when busy, RunnerNotFound when gone."""
        await self.service_request(
            "DELETE", f"{RUNNERS}/{runner_id}", by_status={404: RunnerNotFound}
        )

    # --- message sessions (admin side; MessageSession wraps them for the listener) ---------

    async def create_session(self, scale_set_id: int, *, owner: str) -> RunnerScaleSetSession:
        """Raises SessionConflict when another listener holds this scale set's session."""
        response = await self.service_request(
            "POST",
            f"{SCALE_SETS}/{scale_set_id}/sessions",
            json_body={"sessionId": NIL_SESSION_ID, "ownerName": owner},
            by_status={404: ScaleSetNotFound, 409: SessionConflict},
        )
        return self._session(response)

    async def refresh_session(self, scale_set_id: int, session_id: str) -> RunnerScaleSetSession:
        """A new message-queue token (and possibly URL). Raises SessionNotFound when gone."""
        response = await self.service_request(
            "PATCH",
            f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}",
            by_status={404: SessionNotFound},
        )
        return self._session(response)

    async def delete_session(self, scale_set_id: int, session_id: str) -> None:
        try:
            await self.service_request(
                "DELETE",
                f"{SCALE_SETS}/{scale_set_id}/sessions/{session_id}",
                by_status={404: SessionNotFound},
            )
        finally:
            self._forget_tokens(_session_tokens(session_id))

    def _session(self, response: Response) -> RunnerScaleSetSession:
        session = self._required(response, RunnerScaleSetSession)
        if not session.session_id or not session.message_queue_url:
            raise UnexpectedResponse(
                f"{response.method} {response.url} answered {response.status} with a session "
                "lacking sessionId or messageQueueUrl"
            )
        self.remember_token(
            _session_tokens(session.session_id),
            session.message_queue_access_token.get_secret_value(),
        )
        return session

    async def open_message_session(self, scale_set_id: int, *, owner: str) -> MessageSession:
        """Create a session and return its message client (close it to delete the session)."""
        session = await self.create_session(scale_set_id, owner=owner)
        return MessageSession(self, scale_set_id=scale_set_id, session=session)


def _session_tokens(session_id: str) -> str:
    """The kind of token of one message session: each session's are kept until it is
    deleted."""
    return f"message queue {session_id}"


def _activity(response: Response) -> str:
    activity = response.headers.get("ActivityId")
    return f" (activity_id={activity!r})" if activity else ""


def _with_default_labels(scale_set: RunnerScaleSet) -> RunnerScaleSet:
    if not scale_set.labels:
        if not scale_set.name:
            raise InvalidArgument("a runner scale set needs a name or at least one label")
        return replace(scale_set, labels=[Label(name=scale_set.name)])
    return replace(
        scale_set, labels=[replace(lb, type=lb.type or "System") for lb in scale_set.labels]
    )


_AUTH_FAILURES: dict[int, type[ActionsError]] = {
    status: AuthenticationFailed for status in range(400, 500) if status != 429
}
