"""The HTTP face of the emulator: GitHub REST (tokens), the Actions service, the message queue,
and the admin API, all on one aiohttp application.

Paths (PREFIX is the Actions service base returned by runner-registration):
  /api/v3/...                          GitHub REST as a GHES host serves it
  /tenant/123/_apis/...                the Actions service
  /broker/message[/{id}]?sessionId=..  the message queue of a session
  /_admin/...                          test and operator controls (never recorded, no auth)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from sandbox.actions.credentials import (
    TOKEN_KINDS,
    CredentialStore,
    InvalidCredentials,
    IssuedToken,
    TokenKind,
    UnknownInstallation,
)
from sandbox.actions.faults import Fault, Faults
from sandbox.actions.state.records import (
    EX_ARGUMENT,
    EX_SESSION_CONFLICT,
    EX_SESSION_NOT_FOUND,
    RequestRecord,
    ServiceError,
    Session,
    rfc3339,
)
from sandbox.actions.state.service import ServiceState

SERVICE_PREFIX = "/tenant/123/"
MESSAGE_QUEUE_PATH = "/broker/message"
GITHUB_API_PREFIX = "/api/v3"
API_VERSIONS = ("6.0-preview", "6.0")
BOM = b"\xef\xbb\xbf"
EX_UNAUTHORIZED = "GitHub.Services.WebApi.VssUnauthorizedException"
EX_API_VERSION = "GitHub.Services.WebApi.VssVersionNotSpecifiedException"
_GITHUB_ENDPOINTS = ("access_token", "registration_token", "runner_registration")
# Request headers worth keeping in the request log; Authorization never is.
_LOGGED_HEADERS = ("User-Agent", "Content-Type", "Accept", "X-ScaleSetMaxCapacity")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
H = TypeVar("H", bound=Callable[..., Awaitable[web.StreamResponse]])


def endpoint(name: str) -> Callable[[H], H]:
    """Name a handler after the operation it serves: faults and the request log use it."""

    def mark(handler: H) -> H:
        handler.endpoint = name  # type: ignore[attr-defined]
        return handler

    return mark


class GitHubError(Exception):
    """A GitHub REST error, answered as `{"message", "documentation_url"}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Unauthorized(Exception):
    """An Actions-service or message-queue credential was refused (401)."""


def _fault_body(fault: Fault) -> dict[str, str]:
    """The body the real service would send with this status, so clients map it the same."""
    message = f"injected {fault.status}"
    if fault.endpoint in _GITHUB_ENDPOINTS:
        return {"message": message, "documentation_url": "https://docs.github.com/rest"}
    type_name = {
        401: EX_UNAUTHORIZED,
        409: EX_SESSION_CONFLICT if fault.endpoint == "create_session" else "",
        404: EX_SESSION_NOT_FOUND if fault.endpoint == "refresh_session" else "",
    }.get(fault.status or 0, "")
    return {"typeName": type_name or "InjectedFaultException", "message": message}


def config_scope(config_url: str) -> str:
    """The scope a config URL points at (`orgs/o`, `repos/o/r`, `enterprises/e`), or ''."""
    parts = [p for p in urlsplit(config_url.strip("/")).path.strip("/").split("/") if p]
    if len(parts) == 1:
        return f"orgs/{parts[0]}".lower()
    if len(parts) == 2 and parts[0].lower() == "enterprises":
        return f"enterprises/{parts[1]}".lower()
    if len(parts) == 2:
        return f"repos/{parts[0]}/{parts[1]}".lower()
    return ""


def _bearer(request: web.Request, scheme: str = "Bearer") -> str:
    value = request.headers.get("Authorization", "")
    prefix, _, token = value.partition(" ")
    return token.strip() if prefix.lower() == scheme.lower() else ""


class ActionsApp:
    """Builds the aiohttp application over one ServiceState."""

    def __init__(
        self,
        *,
        state: ServiceState,
        credentials: CredentialStore,
        faults: Faults,
        long_poll_timeout: float,
    ) -> None:
        self.state = state
        self.credentials = credentials
        self.faults = faults
        self.long_poll_timeout = long_poll_timeout
        self.closing = False

    def build(self) -> web.Application:
        app = web.Application(middlewares=[self._record, self._errors, self._inject])
        api, svc = GITHUB_API_PREFIX, SERVICE_PREFIX + "_apis/"
        sets, agents = svc + "runtime/runnerscalesets", svc + "distributedtask/pools/0/agents"
        app.router.add_post(api + "/app/installations/{iid}/access_tokens", self.access_token)
        for scope in ("orgs/{org}", "enterprises/{ent}", "repos/{owner}/{repo}"):
            path = f"{api}/{scope}/actions/runners/registration-token"
            app.router.add_post(path, self.registration_token)
        app.router.add_post(api + "/actions/runner-registration", self.runner_registration)
        app.router.add_get(sets, self.get_scale_set_by_name)
        app.router.add_post(sets, self.create_scale_set)
        app.router.add_get(sets + "/{id}", self.get_scale_set)
        app.router.add_patch(sets + "/{id}", self.update_scale_set)
        app.router.add_delete(sets + "/{id}", self.delete_scale_set)
        app.router.add_get(svc + "runtime/runnergroups/", self.get_runner_group)
        app.router.add_get(svc + "runtime/runnergroups", self.get_runner_group)
        app.router.add_post(sets + "/{id}/sessions", self.create_session)
        app.router.add_patch(sets + "/{id}/sessions/{sid}", self.refresh_session)
        app.router.add_delete(sets + "/{id}/sessions/{sid}", self.delete_session)
        app.router.add_post(sets + "/{id}/acquirejobs", self.acquire_jobs)
        app.router.add_get(sets + "/{id}/acquirablejobs", self.acquirable_jobs)
        app.router.add_post(sets + "/{id}/generatejitconfig", self.generate_jit_config)
        app.router.add_get(agents, self.get_runner_by_name)
        app.router.add_get(agents + "/{rid}", self.get_runner)
        app.router.add_delete(agents + "/{rid}", self.remove_runner)
        app.router.add_get(MESSAGE_QUEUE_PATH, self.get_message)
        app.router.add_delete(MESSAGE_QUEUE_PATH + "/{mid}", self.delete_message)
        self._add_admin_routes(app)
        return app

    # -- middlewares ---------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/_admin/"):
            return await handler(request)
        body = await request.read()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.state.requests.append(
                RequestRecord(
                    method=request.method,
                    path=request.path,
                    query=dict(request.query),
                    status=status,
                    endpoint=getattr(request.match_info.handler, "endpoint", ""),
                    headers={
                        h: request.headers[h] for h in _LOGGED_HEADERS if h in request.headers
                    },
                    body=body.decode(errors="replace"),
                )
            )

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ServiceError as exc:
            return self.json({"typeName": exc.type_name, "message": exc.message}, status=exc.status)
        except Unauthorized as exc:
            return self.json({"typeName": EX_UNAUTHORIZED, "message": str(exc)}, status=401)
        except GitHubError as exc:
            return self.json(
                {"message": exc.message, "documentation_url": "https://docs.github.com/rest"},
                status=exc.status,
            )

    @web.middleware
    async def _inject(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        name = getattr(request.match_info.handler, "endpoint", "")
        fault = self.faults.pick(name) if name else None
        if fault is None:
            return await handler(request)
        if fault.latency:
            await asyncio.sleep(fault.latency)
        if fault.status is None:
            return await handler(request)
        return self._fault_response(fault)

    def _fault_response(self, fault: Fault) -> web.Response:
        if fault.empty_body:
            return web.Response(status=200, content_type="application/json", headers=self._ids())
        headers = self._ids()
        if fault.retry_after is not None:
            headers["Retry-After"] = fault.retry_after
        body = fault.body if fault.body is not None else json.dumps(_fault_body(fault))
        return web.Response(
            status=fault.status or 500, text=body, content_type=fault.content_type, headers=headers
        )

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _ids() -> dict[str, str]:
        request_id = str(uuid.uuid4())
        return {"ActivityId": request_id, "X-GitHub-Request-Id": request_id.upper()[:23]}

    def json(self, data: Any, *, status: int = 200) -> web.Response:
        body = json.dumps(data, separators=(",", ":")).encode()
        if self.faults.bom:
            body = BOM + body
        return web.Response(
            status=status, body=body, content_type="application/json", headers=self._ids()
        )

    @staticmethod
    def no_content() -> web.Response:
        return web.Response(status=204, headers=ActionsApp._ids())

    @staticmethod
    async def body(request: web.Request) -> Any:
        raw = await request.read()
        if not raw.strip():
            return None
        try:
            return json.loads(raw.removeprefix(BOM))
        except ValueError as exc:
            raise ServiceError(400, EX_ARGUMENT, "The request body is not valid JSON.") from exc

    @staticmethod
    def int_param(value: str, what: str) -> int:
        if not re.fullmatch(r"-?\d+", value or ""):
            raise ServiceError(400, EX_ARGUMENT, f"{what} must be an integer, got {value!r}.")
        return int(value)

    def _token(self, request: web.Request, kind: TokenKind) -> IssuedToken:
        token = _bearer(request)
        if not token:
            raise Unauthorized("The request has no bearer token.")
        try:
            return self.credentials.check(token, kind)
        except InvalidCredentials as exc:
            raise Unauthorized(str(exc)) from exc

    def admin(self, request: web.Request) -> IssuedToken:
        """Admin token and api-version checks every non-queue service call shares."""
        issued = self._token(request, "admin")
        self.api_version(request)
        return issued

    @staticmethod
    def api_version(request: web.Request) -> None:
        version = request.query.get("api-version")
        if version is None:
            raise ServiceError(
                400,
                EX_API_VERSION,
                f"No api-version was supplied for the {request.method} request; "
                "supply it as the api-version query parameter, e.g. api-version=6.0-preview.",
            )
        if version not in API_VERSIONS:
            raise ServiceError(
                400,
                EX_API_VERSION,
                f"The requested REST API version {version} is out of range for this server.",
            )

    def queue_session(self, request: web.Request, scale_set_id: int | None = None) -> Session:
        issued = self._token(request, "message_queue")
        session = self.state.live_session(issued.session_id)
        if session is None:
            raise Unauthorized("The message queue token belongs to no live session.")
        if scale_set_id is not None and session.scale_set_id != scale_set_id:
            raise Unauthorized("The message queue token belongs to another runner scale set.")
        return session

    def scale_set_id(self, request: web.Request) -> int:
        return self.int_param(request.match_info["id"], "The runner scale set id")

    # -- GitHub REST ---------------------------------------------------------------------

    @endpoint("access_token")
    async def access_token(self, request: web.Request) -> web.Response:
        installation_id = self.int_param(request.match_info["iid"], "The installation id")
        try:
            self.credentials.verify_app_jwt(_bearer(request), installation_id)
        except UnknownInstallation as exc:
            raise GitHubError(404, "Not Found") from exc
        except InvalidCredentials as exc:
            raise GitHubError(401, str(exc)) from exc
        token = self.credentials.issue(
            "installation", ttl=self.credentials.installation_token_ttl, prefix="ghs_"
        )
        expires_at = self.credentials.tokens[token].expires_at
        return self.json(
            {
                "token": token,
                "expires_at": rfc3339(expires_at),
                "permissions": {"organization_self_hosted_runners": "write"},
                "repository_selection": "all",
            },
            status=201,
        )

    @endpoint("registration_token")
    async def registration_token(self, request: web.Request) -> web.Response:
        token = _bearer(request) or _bearer(request, "token")
        if token not in self.credentials.pats:
            try:
                self.credentials.check(token, "installation")
            except InvalidCredentials as exc:
                raise GitHubError(401, "Bad credentials") from exc
        scope = request.path.removeprefix(GITHUB_API_PREFIX + "/").removesuffix(
            "/actions/runners/registration-token"
        )
        issued = self.credentials.issue(
            "registration",
            ttl=self.credentials.registration_token_ttl,
            scope=scope.lower(),
        )
        expires_at = self.credentials.tokens[issued].expires_at
        return self.json({"token": issued, "expires_at": rfc3339(expires_at)}, status=201)

    @endpoint("runner_registration")
    async def runner_registration(self, request: web.Request) -> web.Response:
        try:
            issued = self.credentials.check(_bearer(request, "RemoteAuth"), "registration")
        except InvalidCredentials as exc:
            raise GitHubError(401, "Bad credentials") from exc
        body = await self.body(request)
        if not isinstance(body, dict) or not isinstance(body.get("url"), str):
            raise GitHubError(400, 'The body must be {"url": ..., "runner_event": ...}.')
        if body.get("runner_event") != "register":
            raise GitHubError(400, 'runner_event must be "register".')
        scope = config_scope(body["url"])
        if not scope:
            raise GitHubError(400, "The url must point to an enterprise, org, or repository.")
        if scope != issued.scope:
            raise GitHubError(403, "The registration token was issued for another scope.")
        token, _ = self.credentials.issue_admin_token(scope=scope)
        return self.json(
            {"url": self.state.service_url, "token": token, "token_schema": "OAuthAccessToken"}
        )

    # -- scale sets and runner groups ----------------------------------------------------

    @staticmethod
    def _labels(body: dict[str, Any], name: str) -> list[dict[str, str]]:
        raw = body.get("labels") or []
        if not isinstance(raw, list) or not all(
            isinstance(label, dict) and isinstance(label.get("name"), str) for label in raw
        ):
            raise ServiceError(400, EX_ARGUMENT, "labels must be a list of {type, name}.")
        labels = [{"type": label.get("type") or "System", "name": label["name"]} for label in raw]
        return labels or ([{"type": "System", "name": name}] if name else [])

    @staticmethod
    def _scale_set_fields(body: Any) -> tuple[str, int, dict[str, Any] | None]:
        if not isinstance(body, dict):
            raise ServiceError(400, EX_ARGUMENT, "The body must be a runner scale set object.")
        name = body.get("name") or ""
        group = body.get("runnerGroupId") or 0
        setting = body.get("RunnerSetting")
        if not isinstance(name, str) or not isinstance(group, int):
            raise ServiceError(400, EX_ARGUMENT, "name must be a string, runnerGroupId an int.")
        if setting is not None and not isinstance(setting, dict):
            raise ServiceError(400, EX_ARGUMENT, "RunnerSetting must be an object.")
        return name, group, setting

    @endpoint("get_scale_set_by_name")
    async def get_scale_set_by_name(self, request: web.Request) -> web.Response:
        self.admin(request)
        group = request.query.get("runnerGroupId")
        found = self.state.find_scale_sets(
            name=request.query.get("name", ""),
            runner_group_id=None if group is None else self.int_param(group, "runnerGroupId"),
        )
        return self.json(
            {"count": len(found), "value": [self.state.scale_set_wire(s) for s in found]}
        )

    @endpoint("get_scale_set")
    async def get_scale_set(self, request: web.Request) -> web.Response:
        self.admin(request)
        scale_set = self.state.scale_set(self.scale_set_id(request))
        return self.json(self.state.scale_set_wire(scale_set))

    @endpoint("create_scale_set")
    async def create_scale_set(self, request: web.Request) -> web.Response:
        self.admin(request)
        body = await self.body(request)
        name, group, setting = self._scale_set_fields(body)
        scale_set = self.state.create_scale_set(
            name=name,
            runner_group_id=group or 1,
            labels=self._labels(body, name),
            runner_setting=setting or {},
        )
        return self.json(self.state.scale_set_wire(scale_set))

    @endpoint("update_scale_set")
    async def update_scale_set(self, request: web.Request) -> web.Response:
        self.admin(request)
        body = await self.body(request)
        name, group, setting = self._scale_set_fields(body)
        scale_set = self.state.update_scale_set(
            self.scale_set_id(request),
            name=name,
            runner_group_id=group,
            labels=self._labels(body, ""),
            runner_setting=setting,
        )
        return self.json(self.state.scale_set_wire(scale_set))

    @endpoint("delete_scale_set")
    async def delete_scale_set(self, request: web.Request) -> web.Response:
        self.admin(request)
        self.state.delete_scale_set(self.scale_set_id(request))
        return self.no_content()

    @endpoint("get_runner_group")
    async def get_runner_group(self, request: web.Request) -> web.Response:
        self.admin(request)
        groups = self.state.runner_groups_named(request.query.get("groupName", ""))
        value = [
            g.to_wire(sum(1 for s in self.state.scale_sets.values() if s.runner_group_id == g.id))
            for g in groups
        ]
        return self.json({"count": len(value), "value": value})

    # -- sessions and the message queue --------------------------------------------------

    @endpoint("create_session")
    async def create_session(self, request: web.Request) -> web.Response:
        self.admin(request)
        body = await self.body(request)
        owner = body.get("ownerName") if isinstance(body, dict) else None
        if not isinstance(owner, str) or not owner:
            raise ServiceError(400, EX_ARGUMENT, "ownerName is required.")
        session = self.state.create_session(self.scale_set_id(request), owner_name=owner)
        return self.json(self.state.session_wire(session))

    @endpoint("refresh_session")
    async def refresh_session(self, request: web.Request) -> web.Response:
        self.admin(request)
        session = self.state.refresh_session(self.scale_set_id(request), request.match_info["sid"])
        return self.json(self.state.session_wire(session))

    @endpoint("delete_session")
    async def delete_session(self, request: web.Request) -> web.Response:
        self.admin(request)
        self.state.delete_session(self.scale_set_id(request), request.match_info["sid"])
        return self.no_content()

    def _message_session(self, request: web.Request) -> Session:
        session = self.queue_session(request)
        if request.query.get("sessionId") != session.id:
            raise Unauthorized("The message queue token does not belong to this session.")
        return session

    @endpoint("get_message")
    async def get_message(self, request: web.Request) -> web.Response:
        session = self._message_session(request)
        last = self.int_param(request.query.get("lastMessageId", "0"), "lastMessageId")
        capacity = request.headers.get("X-ScaleSetMaxCapacity")
        if capacity is not None:
            if not capacity.isdigit():
                return web.Response(
                    status=400,
                    text="X-ScaleSetMaxCapacity must be a non-negative integer.",
                    headers=self._ids(),
                )
            session.max_capacity = int(capacity)
        session.polls_in_flight += 1
        self.state.notify()
        deadline = time.monotonic() + self.long_poll_timeout
        try:
            while not self.closing:
                if session.id not in self.state.sessions:
                    raise Unauthorized("The session of this message queue token ended.")
                message = self.state.next_message(session.scale_set_id, last_message_id=last)
                if message is not None:
                    return self.json(message.to_wire())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await self.state.wait_changed(within=remaining)
        finally:
            session.polls_in_flight -= 1
            session.last_seen = time.monotonic()
        return web.Response(status=202, headers=self._ids())

    @endpoint("delete_message")
    async def delete_message(self, request: web.Request) -> web.Response:
        session = self._message_session(request)
        message_id = self.int_param(request.match_info["mid"], "The message id")
        self.state.ack_message(session.scale_set_id, message_id)
        return self.no_content()

    @endpoint("acquire_jobs")
    async def acquire_jobs(self, request: web.Request) -> web.Response:
        scale_set_id = self.scale_set_id(request)
        self.queue_session(request, scale_set_id)
        self.api_version(request)
        body = await self.body(request)
        if not isinstance(body, list) or not all(isinstance(i, int) for i in body):
            raise ServiceError(400, EX_ARGUMENT, "The body must be a JSON array of request ids.")
        acquired = self.state.acquire_jobs(scale_set_id, body)
        return self.json({"count": len(acquired), "value": acquired})

    @endpoint("acquirable_jobs")
    async def acquirable_jobs(self, request: web.Request) -> web.Response:
        self.admin(request)
        jobs = self.state.acquirable_jobs(self.state.scale_set(self.scale_set_id(request)).id)
        if not jobs:
            return self.no_content()
        return self.json({"count": len(jobs), "value": jobs})

    # -- runners -------------------------------------------------------------------------

    @endpoint("generate_jit_config")
    async def generate_jit_config(self, request: web.Request) -> web.Response:
        self.admin(request)
        body = await self.body(request)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise ServiceError(400, EX_ARGUMENT, 'The body must be {"name", "workFolder"}.')
        work_folder = body.get("workFolder") or ""
        if not isinstance(work_folder, str):
            raise ServiceError(400, EX_ARGUMENT, "workFolder must be a string.")
        runner, files = self.state.generate_jit_config(
            self.scale_set_id(request), name=body["name"], work_folder=work_folder
        )
        return self.json({"runner": runner.to_wire(), "encodedJITConfig": encode_jit(files)})

    @endpoint("get_runner")
    async def get_runner(self, request: web.Request) -> web.Response:
        self.admin(request)
        runner_id = self.int_param(request.match_info["rid"], "The runner id")
        return self.json(self.state.runner(runner_id).to_wire())

    @endpoint("get_runner_by_name")
    async def get_runner_by_name(self, request: web.Request) -> web.Response:
        self.admin(request)
        name = request.query.get("agentName")
        runners = (
            list(self.state.runners.values()) if name is None else self.state.runners_named(name)
        )
        return self.json({"count": len(runners), "value": [r.to_wire() for r in runners]})

    @endpoint("remove_runner")
    async def remove_runner(self, request: web.Request) -> web.Response:
        self.admin(request)
        self.state.remove_runner(self.int_param(request.match_info["rid"], "The runner id"))
        return self.no_content()

    # -- admin API -----------------------------------------------------------------------

    def _add_admin_routes(self, app: web.Application) -> None:
        admin = "/_admin"
        app.router.add_get(admin + "/state", self.admin_state)
        app.router.add_get(admin + "/requests", self.admin_requests)
        app.router.add_post(admin + "/jobs", self.admin_enqueue_job)
        app.router.add_post(admin + "/jobs/{jid}/cancel", self.admin_cancel_job)
        app.router.add_post(admin + "/jobs/{jid}/reoffer", self.admin_reoffer_job)
        app.router.add_get(admin + "/faults", self.admin_faults)
        app.router.add_post(admin + "/faults", self.admin_add_fault)
        app.router.add_delete(admin + "/faults", self.admin_clear_faults)
        app.router.add_post(admin + "/tokens/expire", self.admin_expire_tokens)
        app.router.add_post(admin + "/sessions/evict", self.admin_evict_sessions)
        app.router.add_post(admin + "/runner-version", self.admin_runner_version)
        app.router.add_post(admin + "/runner-groups", self.admin_add_runner_group)
        app.router.add_post(admin + "/pats", self.admin_add_pat)
        app.router.add_post(admin + "/apps", self.admin_add_app)

    @staticmethod
    async def _admin_body(request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise web.HTTPBadRequest(text="the body is not valid JSON") from exc
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="the body must be a JSON object")
        return body

    async def admin_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state.snapshot())

    async def admin_requests(self, request: web.Request) -> web.Response:
        return web.json_response([asdict(r) for r in self.state.requests])

    async def admin_enqueue_job(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        labels = body.get("labels")
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise web.HTTPBadRequest(text="labels must be a list of strings")
        try:
            job_id = self.state.enqueue_job(**job_fields(body, labels))
        except (TypeError, ValueError) as exc:
            raise web.HTTPBadRequest(text=str(exc)) from exc
        return web.json_response({"runnerRequestId": job_id}, status=201)

    async def admin_cancel_job(self, request: web.Request) -> web.Response:
        job_id = self.int_param(request.match_info["jid"], "The job id")
        if job_id not in self.state.jobs:
            raise web.HTTPNotFound(text=f"no job {job_id}")
        self.state.cancel_job(job_id)
        return web.Response(status=204)

    async def admin_reoffer_job(self, request: web.Request) -> web.Response:
        job_id = self.int_param(request.match_info["jid"], "The job id")
        if job_id not in self.state.jobs:
            raise web.HTTPNotFound(text=f"no job {job_id}")
        try:
            self.state.reoffer_job(job_id)
        except ValueError as exc:
            raise web.HTTPConflict(text=str(exc)) from exc
        return web.Response(status=204)

    async def admin_faults(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "faults": [f.to_wire() for f in self.faults.active],
                "bom": self.faults.bom,
                "runnerCrashExitCode": self.faults.runner_crash_exit_code,
            }
        )

    async def admin_add_fault(self, request: web.Request) -> web.Response:
        body = await self._admin_body(request)
        if "bom" in body:
            self.faults.bom = bool(body.pop("bom"))
        if "runnerCrashExitCode" in body:
            self.faults.crash_runners(body.pop("runnerCrashExitCode"))
        if "endpoint" not in body:
            return await self.admin_faults(request)
        try:
            fault = self.faults.inject(
                str(body["endpoint"]),
                status=body.get("status"),
                rate=float(body.get("rate", 1.0)),
                count=body.get("count"),
                retry_after=body.get("retryAfter"),
                latency=float(body.get("latency", 0.0)),
                empty_body=bool(body.get("emptyBody", False)),
                body=body.get("body"),
                content_type=str(body.get("contentType", "application/json")),
            )
        except (TypeError, ValueError) as exc:
            raise web.HTTPBadRequest(text=str(exc)) from exc
        return web.json_response(fault.to_wire(), status=201)

    async def admin_clear_faults(self, request: web.Request) -> web.Response:
        self.faults.clear()
        return web.Response(status=204)

    async def admin_expire_tokens(self, request: web.Request) -> web.Response:
        kind = (await self._admin_body(request)).get("kind")
        if kind is not None and kind not in TOKEN_KINDS:
            raise web.HTTPBadRequest(text=f"unknown token kind {kind!r}")
        return web.json_response({"expired": self.faults.expire_tokens(kind)})

    async def admin_evict_sessions(self, request: web.Request) -> web.Response:
        scale_set_id = (await self._admin_body(request)).get("runnerScaleSetId")
        if scale_set_id is not None and not isinstance(scale_set_id, int):
            raise web.HTTPBadRequest(text="runnerScaleSetId must be an integer")
        return web.json_response({"evicted": self.faults.evict_sessions(scale_set_id)})

    async def admin_runner_version(self, request: web.Request) -> web.Response:
        deprecated = (await self._admin_body(request)).get("deprecated")
        if not isinstance(deprecated, bool):
            raise web.HTTPBadRequest(text="deprecated must be true or false")
        self.state.runner_version_deprecated = deprecated
        self.state.notify()
        return web.json_response({"deprecated": deprecated})

    async def admin_add_runner_group(self, request: web.Request) -> web.Response:
        name = (await self._admin_body(request)).get("name")
        if not isinstance(name, str) or not name:
            raise web.HTTPBadRequest(text="name is required")
        return web.json_response({"id": self.state.add_runner_group(name)}, status=201)

    async def admin_add_pat(self, request: web.Request) -> web.Response:
        return web.json_response({"token": self.credentials.add_pat()}, status=201)

    async def admin_add_app(self, request: web.Request) -> web.Response:
        app = self.credentials.add_app()
        return web.json_response(
            {
                "appId": app.app_id,
                "clientId": app.client_id,
                "installationId": app.installation_id,
                "privateKey": app.private_key_pem,
            },
            status=201,
        )


def job_fields(body: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """enqueue_job keyword arguments from an admin request body, with the Python defaults."""
    repository = str(body.get("repository", "owner/repo"))
    return {
        "labels": labels,
        "duration": float(body.get("duration", 0.0)),
        "result": str(body.get("result", "succeeded")),
        "repository": repository,
        "workflow_ref": str(body.get("workflowRef", default_workflow_ref(repository))),
        "display_name": str(body.get("displayName", "build")),
        "event_name": str(body.get("eventName", "push")),
    }


def default_workflow_ref(repository: str) -> str:
    return f"{repository}/.github/workflows/ci.yml@refs/heads/main"


def encode_jit(files: dict[str, Any]) -> str:
    """The runner's JIT blob: base64 of a JSON map from settings file name to base64 content."""
    encoded = {
        name: base64.b64encode(json.dumps(content).encode()).decode()
        for name, content in files.items()
    }
    return base64.b64encode(json.dumps(encoded).encode()).decode()


def decode_jit(blob: str) -> dict[str, Any]:
    """The settings files of a JIT blob; ValueError when it is not one."""
    try:
        outer = json.loads(base64.b64decode(blob, validate=True))
        return {name: json.loads(base64.b64decode(content)) for name, content in outer.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError("not an encoded JIT config") from exc
