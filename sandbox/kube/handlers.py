"""The HTTP surface: request parsing, authentication, authorisation, faults and dispatch.

One catch-all aiohttp handler parses the path the way the apiserver's RequestInfoFactory does,
then answers from the registry. Every body is compact single-line JSON; every error a Status.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from sandbox.kube import discovery, protobuf
from sandbox.kube.faults import Faults, Request, Requests
from sandbox.kube.rbac import (
    MASTERS,
    Attributes,
    Authorizer,
    Tokens,
    User,
    service_account_user,
    user_for_name,
)
from sandbox.kube.registry import FIELD_VALIDATION, Registry, timestamp
from sandbox.kube.resources import Catalog, ResourceType
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.status import (
    ApiError,
    bad_request,
    for_code,
    forbidden,
    forbidden_path,
    internal,
    method_not_allowed,
    too_old,
    unauthorized,
    unknown_path,
)
from sandbox.kube.store import Event, Store

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube")

NAMESPACE_SUBRESOURCES = ("status", "finalize")
ADMIN_PREFIX = "/_emulator"
DEFAULT_TOKEN_SECONDS = 3600
LINE_CACHE = 4096
USER = web.RequestKey("user", User)
ACCOUNTED = web.RequestKey("accounted", bool)
# kube-apiserver's old insecure port served unauthenticated requests as this member of
# system:masters; kubectl sends no bearer token over plain http, so the http mode needs it.
INSECURE_USER = User("system:unsecured", (MASTERS, "system:authenticated"))


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def json_response(
    obj: Any, status: int = 200, *, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=dumps(obj), status=status, content_type="application/json", headers=headers
    )


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code, headers=err.headers)


def go_bool(value: str | None) -> bool:
    """strconv-style query booleans: absent, "0" and any case of "false" are false."""
    if value is None:
        return False
    return value.lower() not in ("0", "false")


@dataclass
class RequestInfo:
    verb: str
    path: str
    resource_request: bool
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""


def parse_path(method: str, path: str, *, query: Any) -> RequestInfo:
    parts = [p for p in path.split("/") if p]
    http_verb = {
        "GET": "get",
        "HEAD": "get",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method, method.lower())
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(http_verb, path, False)
    if parts[0] == "api":
        if len(parts) < 3:
            return RequestInfo(http_verb, path, False)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return RequestInfo(http_verb, path, False)
        group, version, rest = parts[1], parts[2], parts[3:]
    info = RequestInfo(http_verb, path, True, group=group, version=version)
    if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
        info.namespace = rest[1]
        rest = rest[2:]
    info.resource = rest[0]
    if len(rest) > 1:
        info.name = rest[1]
    if len(rest) > 2:
        info.subresource = rest[2]
    if len(rest) > 3:
        raise unknown_path()
    if not info.name:
        if method == "GET":
            info.verb = "watch" if go_bool(query.get("watch")) else "list"
        elif method == "DELETE":
            info.verb = "deletecollection"
    return info


class ApiServer:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        registry: Registry,
        tokens: Tokens,
        authorizer: Authorizer,
        faults: Faults,
        requests: Requests,
        bookmark_interval: float,
        watch_timeout: float,
        insecure_admin: bool = False,
    ) -> None:
        self.store = store
        self.insecure_admin = insecure_admin
        self.catalog = catalog
        self.registry = registry
        self.tokens = tokens
        self.authorizer = authorizer
        self.faults = faults
        self.requests = requests
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.host = "127.0.0.1:0"
        self._lines: dict[tuple[int, str, str], bytes] = {}
        faults.on_drop_watches.append(self._drop_watches)
        faults.on_force_gone.append(self._force_gone)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    # --- fault hooks -------------------------------------------------------------------------

    def _drop_watches(self) -> None:
        for sub in list(self.store.subscriptions):
            sub.queue.put_nowait(ConnectionAbortedError("dropped by fault injection"))

    def _force_gone(self) -> None:
        self.store.compact()
        for sub in list(self.store.subscriptions):
            if sub.keys is not None:
                sub.queue.put_nowait(too_old(0, self.store.rv))

    # --- entry point -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(ADMIN_PREFIX):
            return await self._admin(request)
        info: RequestInfo | None = None
        user_name = ""
        code = 500
        try:
            user = self._authenticate(request)
            user_name = user.name
            user = self._impersonate(request, user)
            user_name = user.name
            request[USER] = user
            info = parse_path(request.method, request.path, query=request.query)
            if self.faults.paused or self.faults.rules:
                await self.faults.wait_resumed()
                status, delay, message = self.faults.decide(
                    info.verb, resource=info.resource, subresource=info.subresource
                )
                if delay:
                    await asyncio.sleep(delay)
                if status:
                    raise for_code(status, f"{info.verb} {info.resource}", message=message)
            self._authorize(user, info)
            warnings: list[str] = []
            mode = request.query.get(
                "fieldValidation",
                "Warn" if request.method in ("POST", "PUT", "PATCH") else "Ignore",
            )
            if mode not in ("Ignore", "Warn", "Strict"):
                raise bad_request(
                    f"fieldValidation must be one of Ignore, Warn or Strict, not {mode!r}"
                )
            FIELD_VALIDATION.set((mode, warnings))
            response = await self._dispatch(request, info, user=user)
            for warning in warnings:
                quoted = warning.replace("\\", "\\\\").replace('"', '\\"')
                response.headers.add("Warning", f'299 - "{quoted}"')
            code = response.status
            return response
        except ApiError as err:
            code = err.code
            return error_response(err)
        except (ConnectionResetError, asyncio.CancelledError):
            code = 499
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            failure = internal(type(exc).__name__)
            code = failure.code
            return error_response(failure)
        finally:
            if not request.get(ACCOUNTED):
                self.requests.record(
                    Request(
                        verb=info.verb if info else request.method.lower(),
                        resource=info.resource if info else "",
                        subresource=info.subresource if info else "",
                        user=user_name,
                        namespace=info.namespace if info else "",
                        code=code,
                        path=request.path_qs,
                        content_type=request.headers.get("Content-Type", ""),
                    )
                )

    def _authenticate(self, request: web.Request) -> User:
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            user = self.tokens.lookup(header[7:].strip())
            if user is not None:
                return user
        elif not header and self.insecure_admin:
            return INSECURE_USER
        raise unauthorized()

    def _impersonate(self, request: web.Request, user: User) -> User:
        name = request.headers.get("Impersonate-User")
        groups = request.headers.getall("Impersonate-Group", [])
        if not name and not groups:
            return user
        if not name:
            raise bad_request("requested impersonation of groups without a user")
        parts = name.split(":")
        if name.startswith("system:serviceaccount:") and len(parts) == 4:
            checks = [
                Attributes(
                    user,
                    "impersonate",
                    namespace=parts[2],
                    resource="serviceaccounts",
                    name=parts[3],
                )
            ]
        else:
            checks = [Attributes(user, "impersonate", resource="users", name=name)]
        checks += [Attributes(user, "impersonate", resource="groups", name=g) for g in groups]
        for attrs in checks:
            allowed, _ = self.authorizer.authorize(attrs)
            if not allowed:
                raise forbidden(
                    attrs.resource, group="", name=attrs.name, why=attrs.forbidden_message()
                )
        return user_for_name(name, groups)

    def _authorize(self, user: User, info: RequestInfo) -> None:
        if info.resource_request:
            attrs = Attributes(
                user,
                info.verb,
                info.namespace,
                info.group,
                info.resource,
                info.subresource,
                info.name,
            )
        else:
            attrs = Attributes(user, info.verb, path=info.path)
        allowed, _ = self.authorizer.authorize(attrs)
        if allowed:
            return
        if not info.resource_request:
            raise forbidden_path(attrs.forbidden_message())
        raise forbidden(
            info.resource, group=info.group, name=info.name, why=attrs.forbidden_message()
        )

    # --- dispatch ----------------------------------------------------------------------------

    async def _dispatch(
        self, request: web.Request, info: RequestInfo, *, user: User
    ) -> web.StreamResponse:
        if not info.resource_request:
            return self._non_resource(request)
        rt = self.catalog.get(info.group, version=info.version, plural=info.resource)
        if rt is None:
            raise unknown_path()
        cross_namespace_read = request.method == "GET" and not info.name
        if (info.namespace and not rt.namespaced) or (
            rt.namespaced and not info.namespace and not cross_namespace_read
        ):
            raise unknown_path()
        if rt.virtual:
            if request.method != "POST":
                raise method_not_allowed(request.method, plural=rt.plural, group=rt.group)
            return await self._review(request, rt, info=info, user=user)
        if info.subresource:
            return await self._subresource(request, rt, info=info)
        q = request.query
        dry_run = "All" in q.getall("dryRun", [])
        if request.method == "GET" and info.name:
            obj = self.registry.render(rt, self.registry.get(rt, ns=info.namespace, name=info.name))
            return self._maybe_table(request, rt, items=[obj], plain=obj, single=True)
        if request.method == "GET":
            return await self._list_or_watch(request, rt, info=info)
        if request.method == "POST" and not info.name:
            body = await self._body(request)
            obj = self.registry.create(rt, ns=info.namespace, body=body, dry_run=dry_run)
            return json_response(obj, 201)
        if request.method == "PUT" and info.name:
            body = await self._body(request)
            obj, created = self.registry.update(
                rt, ns=info.namespace, name=info.name, body=body, dry_run=dry_run
            )
            return json_response(obj, 201 if created else 200)
        if request.method == "PATCH" and info.name:
            return await self._patch(request, rt, info=info, subresource="")
        if request.method == "DELETE" and info.name:
            options = await self._delete_options(request)
            code, body = self.registry.delete(
                rt, ns=info.namespace, name=info.name, options=options, dry_run=dry_run
            )
            return json_response(body, code)
        if request.method == "DELETE":
            return await self._delete_collection(request, rt, info=info)
        raise method_not_allowed(request.method, plural=rt.plural, group=rt.group)

    async def _patch(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo, subresource: str
    ) -> web.Response:
        q = request.query
        ctype = request.content_type
        raw = await request.read()
        try:
            body = yaml.safe_load(raw) if "yaml" in ctype else json.loads(raw or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"error decoding patch: {exc}") from exc
        force = go_bool(q["force"]) if "force" in q else None
        obj, created = self.registry.patch(
            rt,
            ns=info.namespace,
            name=info.name,
            content_type=ctype,
            body=body,
            subresource=subresource,
            field_manager=q.get("fieldManager", ""),
            force=force,
            dry_run="All" in q.getall("dryRun", []),
        )
        return json_response(obj, 201 if created else 200)

    async def _subresource(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo
    ) -> web.Response:
        sub = info.subresource
        if sub == "token" and rt.key == ("", "serviceaccounts"):
            if request.method != "POST":
                raise method_not_allowed(request.method, plural="serviceaccounts/token", group="")
            return await self._token_request(request, rt, info=info)
        if sub == "log" and rt.key == ("", "pods"):
            self.registry.get(rt, ns=info.namespace, name=info.name)
            return web.Response(text="", content_type="text/plain")
        if sub != "status" or not rt.has_subresource(sub):
            raise unknown_path()
        if request.method == "GET":
            return json_response(
                self.registry.render(rt, self.registry.get(rt, ns=info.namespace, name=info.name))
            )
        if request.method == "PUT":
            body = await self._body(request)
            obj, _ = self.registry.update(
                rt,
                ns=info.namespace,
                name=info.name,
                body=body,
                subresource=sub,
                dry_run="All" in request.query.getall("dryRun", []),
            )
            return json_response(obj)
        if request.method == "PATCH":
            return await self._patch(request, rt, info=info, subresource=sub)
        raise method_not_allowed(request.method, plural=f"{rt.plural}/{sub}", group=rt.group)

    async def _token_request(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo
    ) -> web.Response:
        sa = self.registry.get(rt, ns=info.namespace, name=info.name)
        body = await self._body(request)
        spec = (body or {}).get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
        token = self.tokens.issue(
            service_account_user(info.namespace, info.name, uid=sa["metadata"]["uid"])
        )
        expires = self.registry.clock() + dt.timedelta(seconds=seconds)
        return json_response(
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {
                    "name": info.name,
                    "namespace": info.namespace,
                    "creationTimestamp": None,
                },
                "spec": {
                    "audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                    "expirationSeconds": seconds,
                    "boundObjectRef": spec.get("boundObjectRef"),
                },
                "status": {"token": token, "expirationTimestamp": timestamp(expires)},
            },
            201,
        )

    async def _review(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo, user: User
    ) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        spec = body.get("spec") or {}
        out: Obj = {
            "kind": rt.kind,
            "apiVersion": rt.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
        }
        if rt.plural == "tokenreviews":
            found = self.tokens.lookup(str(spec.get("token", "")))
            out["status"] = (
                {
                    "authenticated": True,
                    "user": found.info(),
                    "audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                }
                if found
                else {"authenticated": False}
            )
            return json_response(out, 201)
        if rt.plural == "selfsubjectreviews":
            out["status"] = {"userInfo": user.info()}
            return json_response(out, 201)
        if rt.plural == "selfsubjectrulesreviews":
            res, non = self.authorizer.rules_for(user, str(spec.get("namespace", "")))
            out["status"] = {"resourceRules": res, "nonResourceRules": non, "incomplete": False}
            return json_response(out, 201)
        subject = user
        if rt.plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
            if not spec.get("user") and not spec.get("groups"):
                raise bad_request("at least one of user or group must be specified")
            subject = User(
                str(spec.get("user", "")), tuple(spec.get("groups") or ()), str(spec.get("uid", ""))
            )
        ra = spec.get("resourceAttributes")
        nra = spec.get("nonResourceAttributes")
        if rt.plural == "localsubjectaccessreviews":
            if ra is None or ra.get("namespace", info.namespace) != info.namespace:
                raise bad_request("spec.resourceAttributes.namespace must match the namespace")
            body.setdefault("metadata", {})["namespace"] = info.namespace
        if ra is not None:
            attrs = Attributes(
                subject,
                str(ra.get("verb", "")),
                str(ra.get("namespace", "")),
                str(ra.get("group", "")),
                str(ra.get("resource", "")),
                str(ra.get("subresource", "")),
                str(ra.get("name", "")),
            )
        elif nra is not None:
            attrs = Attributes(subject, str(nra.get("verb", "")), path=str(nra.get("path", "")))
        else:
            raise bad_request(
                "exactly one of nonResourceAttributes or resourceAttributes must be specified"
            )
        allowed, reason = self.authorizer.authorize(attrs)
        out["status"] = {"allowed": allowed}
        if reason:
            out["status"]["reason"] = reason
        if rt.plural != "selfsubjectaccessreviews":
            out["metadata"] = body.get("metadata") or {"creationTimestamp": None}
        return json_response(out, 201)

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        ctype = request.content_type
        try:
            if ctype == protobuf.PROTOBUF:
                return protobuf.decode(raw)
            if "yaml" in ctype:
                return yaml.safe_load(raw)
            return json.loads(raw) if raw else None
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"unable to decode the request body: {exc}") from exc

    async def _delete_options(self, request: web.Request) -> Obj:
        body = await self._body(request) if request.can_read_body else None
        opts: Obj = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "orphanDependents" in q:
            opts["orphanDependents"] = go_bool(q["orphanDependents"])
        return opts

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo
    ) -> web.Response:
        q = request.query
        labels = LabelSelector.parse(q.get("labelSelector"))
        fields = FieldSelector.parse(q.get("fieldSelector"))
        fields.check_supported(rt.supports_field, rt.kind)
        options = await self._delete_options(request)
        ns = info.namespace or None
        for obj in [
            o for o in self.store.items(rt.key, ns) if labels.matches(o) and fields.matches(o)
        ]:
            meta = obj["metadata"]
            with contextlib.suppress(ApiError):
                self.registry.delete(
                    rt, ns=meta.get("namespace", ""), name=meta["name"], options=options
                )
        return json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        )

    # --- list and watch ----------------------------------------------------------------------

    def _selectors(
        self, request: web.Request, rt: ResourceType
    ) -> tuple[LabelSelector, FieldSelector]:
        q = request.query
        labels = LabelSelector.parse(q.get("labelSelector"))
        fields = FieldSelector.parse(q.get("fieldSelector"))
        fields.check_supported(rt.supports_field, f"{rt.api_version}, Resource={rt.plural}")
        return labels, fields

    async def _list_or_watch(
        self, request: web.Request, rt: ResourceType, *, info: RequestInfo
    ) -> web.StreamResponse:
        labels, fields = self._selectors(request, rt)
        q = request.query
        if info.verb == "watch":
            return await self._watch(
                request, rt, ns=info.namespace or None, labels=labels, fields=fields
            )
        cont = q.get("continue", "")
        rv = q.get("resourceVersion", "")
        if cont and rv not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        try:
            limit = int(q.get("limit") or 0)
        except ValueError as exc:
            raise bad_request(f"invalid limit: {q.get('limit')}") from exc
        result = self.registry.list(
            rt,
            info.namespace or None,
            labels=labels,
            fields=fields,
            limit=max(limit, 0),
            continue_token=cont,
        )
        return self._maybe_table(request, rt, items=result["items"], plain=result, single=False)

    def _maybe_table(
        self, request: web.Request, rt: ResourceType, *, items: list[Obj], plain: Obj, single: bool
    ) -> web.Response:
        accept = request.headers.get("Accept", "")
        if "as=Table" not in accept:
            return json_response(plain)
        meta = {} if single else plain["metadata"]
        if single:
            meta = {"resourceVersion": plain["metadata"].get("resourceVersion", "")}
        include = request.query.get("includeObject", "Object")
        table = discovery.table(rt, items, list_meta=meta, now=self.registry.clock())
        for row in table["rows"]:
            if include == "None":
                row.pop("object")
            elif include == "Metadata":
                row["object"] = {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": row["object"]["metadata"],
                }
        return json_response(table)

    def _event_line(self, request: web.Request, rt: ResourceType, *, etype: str, obj: Obj) -> bytes:
        if "as=Table" in request.headers.get("Accept", "") and etype in (
            "ADDED",
            "MODIFIED",
            "DELETED",
        ):
            table = discovery.table(
                rt,
                [obj],
                list_meta={"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                now=self.registry.clock(),
            )
            return dumps({"type": etype, "object": table})
        return dumps({"type": etype, "object": obj})

    async def _watch(
        self,
        request: web.Request,
        rt: ResourceType,
        *,
        ns: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> web.StreamResponse:
        q = request.query
        bookmarks = go_bool(q.get("allowWatchBookmarks"))
        rv_param = q.get("resourceVersion", "")
        send_initial = go_bool(q.get("sendInitialEvents"))
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else self.watch_timeout
            start = int(rv_param) if rv_param else 0
        except ValueError as exc:
            raise bad_request(f"invalid watch parameters: {exc}") from exc
        sub = self.store.subscribe({rt.key})
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            await resp.prepare(request)
            # A watch counts once it is established, not when it ends (which may be never).
            self.requests.record(
                Request(
                    verb="watch",
                    resource=rt.plural,
                    subresource="",
                    user=request[USER].name,
                    namespace=ns or "",
                    code=200,
                    path=request.path_qs,
                )
            )
            request[ACCOUNTED] = True

            def matches(obj: Obj | None) -> bool:
                if obj is None:
                    return False
                if ns is not None and obj["metadata"].get("namespace") != ns:
                    return False
                return labels.matches(obj) and fields.matches(obj)

            sent_rv = self.store.rv
            if start == 0 or send_initial:
                for obj in list(self.store.items(rt.key, ns)):
                    if matches(obj):
                        await resp.write(
                            self._event_line(
                                request, rt, etype="ADDED", obj=self.registry.render(rt, obj)
                            )
                        )
                if send_initial and bookmarks:
                    await resp.write(_bookmark(rt, sent_rv, initial_events_end=True))
            else:
                backlog = self.store.events_since(rt.key, start)
                if backlog is None:
                    err = too_old(start, self.store.compacted(rt.key) + 1)
                    await resp.write(dumps({"type": "ERROR", "object": err.status()}))
                    return resp
                sent_rv = start
                for ev in backlog:
                    line = self._translate(request, rt, ev=ev, matches=matches)
                    if line:
                        await resp.write(line)
                    sent_rv = ev.rv
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(next_bookmark - now, 0))
                try:
                    # Queued events go out before any bookmark: wait_for(get(), 0) times out
                    # even when the queue holds an item, which would starve them.
                    if sub.queue.empty():
                        item = await asyncio.wait_for(sub.queue.get(), wait)
                    else:
                        item = sub.queue.get_nowait()
                except TimeoutError:
                    if bookmarks and time.monotonic() >= next_bookmark and sub.queue.empty():
                        await resp.write(_bookmark(rt, self.store.rv))
                        next_bookmark = time.monotonic() + self.bookmark_interval
                    continue
                if isinstance(item, ApiError):
                    await resp.write(dumps({"type": "ERROR", "object": item.status()}))
                    break
                if isinstance(item, BaseException):
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                if item is None:
                    break
                if item.rv <= sent_rv:
                    continue
                line = self._translate(request, rt, ev=item, matches=matches)
                if line:
                    await resp.write(line)
            await resp.write_eof()
        except ApiError as err:
            if resp.prepared:
                await resp.write(dumps({"type": "ERROR", "object": err.status()}))
            else:
                raise
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.unsubscribe(sub)
        return resp

    def _translate(
        self,
        request: web.Request,
        rt: ResourceType,
        *,
        ev: Event,
        matches: Callable[[Obj | None], bool],
    ) -> bytes | None:
        """The line a watcher gets for a stored event, given its selectors (the cacher's
        convertToWatchEvent: ADDED/DELETED when an update enters or leaves the selection)."""
        now_match = matches(ev.obj)
        if ev.type in ("ADDED", "DELETED"):
            return self._shared_line(request, rt, ev=ev, etype=ev.type) if now_match else None
        was = matches(ev.old)
        if now_match:
            return self._shared_line(request, rt, ev=ev, etype="MODIFIED" if was else "ADDED")
        if was and ev.old is not None:
            last = self.registry.render(rt, ev.old)
            last["metadata"] = {**ev.old["metadata"], "resourceVersion": str(ev.rv)}
            return self._event_line(request, rt, etype="DELETED", obj=last)
        return None

    def _shared_line(
        self, request: web.Request, rt: ResourceType, *, ev: Event, etype: str
    ) -> bytes:
        """Serialize an event once for all the watchers that get it in the same form."""
        if "as=Table" in request.headers.get("Accept", ""):
            return self._event_line(request, rt, etype=etype, obj=self.registry.render(rt, ev.obj))
        key = (ev.rv, etype, rt.version)
        line = self._lines.get(key)
        if line is None:
            if len(self._lines) >= LINE_CACHE:
                self._lines.clear()
            line = self._lines[key] = dumps(
                {"type": etype, "object": self.registry.render(rt, ev.obj)}
            )
        return line

    # --- non-resource ------------------------------------------------------------------------

    def _non_resource(self, request: web.Request) -> web.Response:
        path = request.path.rstrip("/") or "/"
        accept = request.headers.get("Accept", "")
        wants_aggregated = "as=APIGroupDiscoveryList" in accept
        aggregated_type = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        if path == "/api":
            if wants_aggregated:
                return _typed(discovery.aggregated(self.catalog, core=True), aggregated_type)
            return json_response(discovery.api_versions(self.host))
        if path == "/apis":
            if wants_aggregated:
                return _typed(discovery.aggregated(self.catalog, core=False), aggregated_type)
            return json_response(discovery.group_list(self.catalog))
        if path == "/version":
            return json_response(discovery.VERSION_INFO)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/openapi/v2":
            return web.Response(body=b"", content_type="application/octet-stream")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            doc = discovery.resource_list(self.catalog, group="", version=parts[1])
        elif parts[0] == "apis" and len(parts) == 2:
            doc = discovery.api_group(self.catalog, parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = discovery.resource_list(self.catalog, group=parts[1], version=parts[2])
        else:
            doc = None
        if doc is None:
            raise unknown_path()
        return json_response(doc)

    # --- admin endpoint ----------------------------------------------------------------------

    async def _admin(self, request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        user = (
            self.tokens.lookup(header[7:].strip()) if header.lower().startswith("bearer ") else None
        )
        if user is None or MASTERS not in user.groups:
            return error_response(unauthorized())
        action = request.path[len(ADMIN_PREFIX) :].strip("/")
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError as exc:
            return error_response(bad_request(f"the body must be JSON: {exc}"))
        if not isinstance(body, dict):
            return error_response(bad_request("the body must be a JSON object"))
        actions: dict[str, Callable[[], None]] = {
            "faults/clear": self.faults.clear,
            "faults/pause": self.faults.pause,
            "faults/resume": self.faults.resume,
            "faults/drop-watches": self.faults.drop_watches,
            "faults/force-gone": self.faults.force_gone,
            "requests/reset": self.requests.reset,
        }
        result: Obj = {}
        if action in actions:
            actions[action]()
        elif action == "faults":
            result = {
                "rules": [r.to_dict() for r in self.faults.rules],
                "paused": self.faults.paused,
            }
        elif action == "faults/inject":
            try:
                result = self.faults.inject(**body).to_dict()
            except TypeError as exc:
                return error_response(bad_request(str(exc)))
        elif action == "requests":
            result = {"total": len(self.requests.log), "counts": self.requests.summary()}
        else:
            return error_response(unknown_path())
        return json_response(result)


def _bookmark(rt: ResourceType, rv: int, *, initial_events_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return dumps(
        {
            "type": "BOOKMARK",
            "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
        }
    )


def _typed(obj: Obj, content_type: str) -> web.Response:
    resp = web.Response(body=dumps(obj), status=200)
    resp.headers["Content-Type"] = content_type
    return resp
