"""The API server's entry point and its object verbs.

One catch-all aiohttp handler authenticates, applies injected faults, authorises, then
dispatches: object reads and writes to the registry (here), virtual kinds to `reviews`, watches
to `watch`, everything outside the API groups to `nonresource`, `/_emulator` to `admin`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import yaml
from aiohttp import web

from sandbox.kube.admission.policies import REQUEST_USER
from sandbox.kube.eviction import evict
from sandbox.kube.faults import Faults, Request, Requests
from sandbox.kube.kinds.subresources import READABLE, WRITABLE
from sandbox.kube.managed import FIELD_MANAGER, manager_from_user_agent
from sandbox.kube.rbac import Authorizer, Tokens, User
from sandbox.kube.registry import FIELD_VALIDATION, Registry
from sandbox.kube.resources import Catalog, ResourceType
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.server.admin import ADMIN_PREFIX, Admin
from sandbox.kube.server.auth import Gate
from sandbox.kube.server.nonresource import non_resource
from sandbox.kube.server.paths import RequestInfo, parse_path
from sandbox.kube.server.reviews import Reviews
from sandbox.kube.server.tables import maybe_table
from sandbox.kube.server.watch import Watches
from sandbox.kube.server.wire import (
    ACCOUNTED,
    USER,
    Obj,
    error_response,
    go_bool,
    json_response,
    read_body,
)
from sandbox.kube.status import (
    ApiError,
    bad_request,
    for_code,
    internal,
    method_not_allowed,
    storage_initializing,
    unknown_path,
)
from sandbox.kube.store import ACTOR, Store

log = logging.getLogger("sandbox.kube")


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
        # A container's output, when the kubelet's runtime keeps it (the project's processes).
        self.pod_logs: Callable[[Obj, str], str] | None = None
        self.gate = Gate(tokens=tokens, authorizer=authorizer, insecure_admin=insecure_admin)
        self.reviews = Reviews(registry=registry, tokens=tokens, authorizer=authorizer)
        self.watches = Watches(
            store=store,
            registry=registry,
            requests=requests,
            bookmark_interval=bookmark_interval,
            watch_timeout=watch_timeout,
            faults=faults,
        )
        self.admin = Admin(tokens=tokens, faults=faults, requests=requests)
        faults.on_drop_watches.append(self.watches.drop_all)
        faults.on_force_gone.append(self.watches.force_gone)
        faults.on_restart.append(self.watches.restart)
        faults.on_initialized.append(store.compact)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    # --- entry point -------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(ADMIN_PREFIX):
            return await self.admin.handle(request)
        info: RequestInfo | None = None
        user_name = ""
        code = 500
        try:
            user = self.gate.authenticate(request)
            user_name = user.name
            user = self.gate.impersonate(request, user)
            user_name = user.name
            request[USER] = user
            ACTOR.set(user_name)
            REQUEST_USER.set(user)
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
            self.gate.authorize(user, info)
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
            FIELD_MANAGER.set(
                request.query.get("fieldManager")
                or manager_from_user_agent(request.headers.get("User-Agent", ""))
            )
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

    # --- dispatch ----------------------------------------------------------------------------

    async def _dispatch(
        self, request: web.Request, info: RequestInfo, *, user: User
    ) -> web.StreamResponse:
        if not info.resource_request:
            return non_resource(request, catalog=self.catalog, host=self.host)
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
            return await self.reviews.review(request, rt, info=info, user=user)
        if info.subresource:
            return await self._subresource(request, rt, info=info)
        q = request.query
        dry_run = "All" in q.getall("dryRun", [])
        if request.method == "GET" and info.name:
            obj = self.registry.render(rt, self.registry.get(rt, ns=info.namespace, name=info.name))
            return maybe_table(
                request, rt, items=[obj], plain=obj, single=True, clock=self.registry.clock
            )
        if request.method == "GET":
            return await self._list_or_watch(request, rt, info=info)
        if request.method == "POST" and not info.name:
            body = await read_body(request)
            obj = self.registry.create(rt, ns=info.namespace, body=body, dry_run=dry_run)
            return json_response(obj, 201)
        if request.method == "PUT" and info.name:
            body = await read_body(request)
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

    # --- object verbs ------------------------------------------------------------------------

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
            return await self.reviews.token_request(request, rt, info=info)
        if sub == "eviction" and rt.key == ("", "pods"):
            if request.method != "POST":
                raise method_not_allowed(request.method, plural="pods/eviction", group="")
            body = await read_body(request)
            answer = evict(
                self.registry,
                rt,
                ns=info.namespace,
                name=info.name,
                body=body,
                dry_run="All" in request.query.getall("dryRun", []),
            )
            return json_response(answer, 201)
        if sub == "log" and rt.key == ("", "pods"):
            pod = self.registry.get(rt, ns=info.namespace, name=info.name)
            return web.Response(text=self._log(pod, request.query), content_type="text/plain")
        if sub not in WRITABLE or not rt.has_subresource(sub):
            raise unknown_path()
        if request.method == "GET" and sub in READABLE:
            return json_response(
                self.registry.read_subresource(
                    rt, ns=info.namespace, name=info.name, subresource=sub
                )
            )
        if request.method == "PUT":
            body = await read_body(request)
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

    def _log(self, pod: Obj, query: Any) -> str:
        if self.pod_logs is None:
            return ""
        containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
        container = query.get("container") or (containers[0] if containers else "")
        text = self.pod_logs(pod, str(container))
        tail = query.get("tailLines")
        if tail and tail.isdigit():
            lines = text.splitlines(keepends=True)
            text = "".join(lines[len(lines) - int(tail) :]) if int(tail) else ""
        return text

    async def _delete_options(self, request: web.Request) -> Obj:
        body = await read_body(request) if request.can_read_body else None
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
        cont = q.get("continue", "")
        rv = q.get("resourceVersion", "")
        # The watch cache serves every watch and the lists that name a resourceVersion; a
        # consistent list and a continued one go to etcd.
        if (info.verb == "watch" or (rv and not cont)) and self.faults.initializing():
            raise storage_initializing()
        if info.verb == "watch":
            return await self.watches.serve(
                request, rt, ns=info.namespace or None, labels=labels, fields=fields
            )
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
        return maybe_table(
            request,
            rt,
            items=result["items"],
            plain=result,
            single=False,
            clock=self.registry.clock,
        )
