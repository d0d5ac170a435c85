"""A generic object client over any kind, core or custom, returning plain dicts.

Core kinds (Pod, Secret, Lease...) come through the same path as custom resources: the request
goes out through `ApiClient.call_api` with `_preload_content=False` and the body is parsed as JSON
here, so no typed model is ever built (typed deserialization is the cost that sinks controllers
at scale: docs/controller-runtime.md#the-object-client). Every request carries a timeout, every
patch is a JSON merge patch, and errors are mapped onto `shared.kube.errors`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from shared.kube.errors import (
    MAX_STATUS_BYTES,
    BadResponse,
    InvalidName,
    KubeError,
    Timeout,
    from_status,
    kube_errors,
)
from shared.kube.http import DEFAULT_TIMEOUT_SECONDS, MERGE_PATCH
from shared.kube.names import NameRule, name_problems, shown
from shared.typedefs import JSONDict
from shared.wire import DecodeError, TooLarge, decode_json, read_capped

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Kind:
    """What a request path needs to know about a kind. `group` is "" for the core group;
    `names` is the API server's rule for the kind's object names."""

    kind: str
    plural: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    names: NameRule = NameRule.SUBDOMAIN

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The collection path (all namespaces when `namespace` is None), or the object path.

        A namespace that is not a DNS-1123 label, or a name not valid for the kind, is
        `InvalidName`: no name may become another path (`..`, `/`, `%2F`) and address an object
        in another namespace (docs/security.md#names-from-tenants).
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            _check(f"{self.kind} namespace", namespace, NameRule.LABEL)
            base += f"/namespaces/{namespace}"
        if name is not None:
            _check(f"{self.kind} name", name, self.names)
        base += f"/{self.plural}"
        return f"{base}/{name}" if name is not None else base


def _check(what: str, value: object, rule: NameRule) -> None:
    problems = name_problems(value, rule)
    if problems:
        raise InvalidName(f"{what} {shown(value)} refused: {'; '.join(problems)}")


POD = Kind("Pod", "pods")
CONFIG_MAP = Kind("ConfigMap", "configmaps")
SECRET = Kind("Secret", "secrets")
SERVICE_ACCOUNT = Kind("ServiceAccount", "serviceaccounts")
# RBAC objects may have any name that is a path segment (`system:controller:...`).
ROLE = Kind("Role", "roles", group="rbac.authorization.k8s.io", names=NameRule.PATH_SEGMENT)
ROLE_BINDING = Kind(
    "RoleBinding", "rolebindings", group="rbac.authorization.k8s.io", names=NameRule.PATH_SEGMENT
)
LEASE = Kind("Lease", "leases", group="coordination.k8s.io")
EVENT = Kind("Event", "events")
POD_DISRUPTION_BUDGET = Kind("PodDisruptionBudget", "poddisruptionbudgets", group="policy")
# Reviews: cluster-scoped questions to the API server, stored nowhere.
SELF_SUBJECT_ACCESS_REVIEW = Kind(
    "SelfSubjectAccessReview",
    "selfsubjectaccessreviews",
    group="authorization.k8s.io",
    namespaced=False,
)
SELF_SUBJECT_REVIEW = Kind(
    "SelfSubjectReview", "selfsubjectreviews", group="authentication.k8s.io", namespaced=False
)
TOKEN_REVIEW = Kind("TokenReview", "tokenreviews", group="authentication.k8s.io", namespaced=False)
SUBJECT_ACCESS_REVIEW = Kind(
    "SubjectAccessReview", "subjectaccessreviews", group="authorization.k8s.io", namespaced=False
)


def _query(params: Mapping[str, object]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        out.append((key, ("true" if value else "false") if isinstance(value, bool) else str(value)))
    return out


MAX_OBJECT_BYTES = 4 * 2**20
"""The cap on an answer holding one object, and on one watch event (docs/security.md#bad-input):
the API server stores at most 1.5 MiB per object (etcd's request limit) and takes request bodies
of at most 3 MiB; JSON of a protobuf-stored kind is larger than its stored form."""
MAX_LIST_BYTES = 256 * 2**20
"""The cap on a list answer: the controller's informers read pages of `page_size` objects, but
`migrate` and `explain` read one namespace's pods, events or runners unpaged (5,000 pods at
about 20 KiB each is 100 MiB)."""


async def _error(resp: aiohttp.ClientResponse) -> KubeError:
    try:
        body = await read_capped(resp, limit=MAX_STATUS_BYTES, what="the Status")
    except TooLarge:
        body = b""
    return from_status(
        resp.status, resp.reason or "", body, retry_after=resp.headers.get("Retry-After")
    )


class Api(Protocol):
    """What `Objects` sends through: kubernetes-asyncio's `ApiClient`, or the lighter
    `shared.kube.http.HttpApi`. Called with `_preload_content=False`, it answers the unread
    response."""

    async def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: Any = ...,
        header_params: Any = ...,
        body: Any = ...,
        auth_settings: Any = ...,
        _preload_content: bool = ...,
        _request_timeout: Any = ...,
    ) -> Any: ...


RequestObserver = Callable[[str, str], None]
"""Called after each request with its method and the answer's status code, or "<error>" when no
answer came (client-go's rest_client_requests_total labels)."""


WriteObserver = Callable[[Kind, JSONDict, str], None]
"""Called with each successful write's answer: the kind, the object, and what was written:
"object", "status" (its `/status`) or "delete" (a deletion the object's finalizers hold)."""


class Objects:
    """Get, list, create, replace, merge-patch, delete and watch objects of any `Kind`."""

    def __init__(
        self,
        api: Api,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        observer: RequestObserver | None = None,
        on_write: WriteObserver | None = None,
    ) -> None:
        self.api = api
        self.timeout = timeout
        self._observe: RequestObserver = observer or (lambda _method, _code: None)
        self._on_write: WriteObserver = on_write or (lambda _kind, _obj, _what: None)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, object] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        try:
            async with kube_errors():
                resp: aiohttp.ClientResponse = await self.api.call_api(
                    path,
                    method,
                    query_params=_query(query or {}),
                    header_params={"Accept": "application/json", "Content-Type": content_type},
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=(
                        request_timeout if request_timeout is not None else self.timeout
                    ),
                )
        except KubeError:
            self._observe(method, "<error>")
            raise
        self._observe(method, str(resp.status))
        if resp.status >= 300:
            async with kube_errors():
                err = await _error(resp)
            resp.release()
            raise err
        return resp

    async def _json(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, object] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        limit: int = MAX_OBJECT_BYTES,
    ) -> JSONDict:
        resp = await self._call(method, path, query=query, body=body, content_type=content_type)
        what = f"the answer to {method} {path}"
        async with kube_errors():
            try:
                data = await read_capped(resp, limit=limit, what=what)
                obj = decode_json(data, limit=limit, what=what)
            except DecodeError as exc:
                raise BadResponse(str(exc), code=resp.status) from None
            finally:
                resp.release()
        if not isinstance(obj, dict):
            raise BadResponse(f"{what} is not a JSON object", code=resp.status)
        return obj

    async def allowed(self, attributes: JSONDict) -> bool:
        """Whether this client's identity may do what the resource attributes name (`verb`,
        `group`, `resource`, and `namespace`, `subresource`, `name` when given): a
        SelfSubjectAccessReview, which every authenticated identity may make."""
        review = await self.create(
            SELF_SUBJECT_ACCESS_REVIEW,
            None,
            {
                "apiVersion": SELF_SUBJECT_ACCESS_REVIEW.api_version,
                "kind": SELF_SUBJECT_ACCESS_REVIEW.kind,
                "spec": {"resourceAttributes": attributes},
            },
        )
        return (review.get("status") or {}).get("allowed") is True

    async def get(self, kind: Kind, namespace: str | None, name: str) -> JSONDict:
        return await self._json("GET", kind.path(namespace, name))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> JSONDict:
        """The list object (`items`, `metadata.resourceVersion`, and `metadata.continue` when
        `limit` cut it short); all namespaces when `namespace` is None."""
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
        }
        return await self._json("GET", kind.path(namespace), query=query, limit=MAX_LIST_BYTES)

    async def create(self, kind: Kind, namespace: str | None, body: JSONDict) -> JSONDict:
        created = await self._json("POST", kind.path(namespace), body=body)
        self._on_write(kind, created, "object")
        return created

    async def replace(self, kind: Kind, namespace: str | None, body: JSONDict) -> JSONDict:
        """A PUT; the server answers 409 when `metadata.resourceVersion` is stale."""
        name = body["metadata"]["name"]
        replaced = await self._json("PUT", kind.path(namespace, name), body=body)
        self._on_write(kind, replaced, "object")
        return replaced

    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: JSONDict,
        *,
        status: bool = False,
    ) -> JSONDict:
        """A JSON merge patch of the object, or of its `/status` subresource."""
        path = kind.path(namespace, name) + ("/status" if status else "")
        patched = await self._json("PATCH", path, body=patch, content_type=MERGE_PATCH)
        self._on_write(kind, patched, "status" if status else "object")
        return patched

    async def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> JSONDict | None:
        """Delete; the object as the answer has it when finalizers hold it (None: it went)."""
        body: JSONDict = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        answer = await self._json("DELETE", kind.path(namespace, name), body=body)
        if answer.get("kind") == kind.kind:
            # Held by finalizers: the answer is the object, now carrying its deletionTimestamp.
            self._on_write(kind, answer, "delete")
            return answer
        return None

    async def watch(
        self,
        kind: Kind,
        namespace: str | None,
        *,
        resource_version: str,
        timeout_seconds: int,
        inactivity_timeout: float,
        connect_timeout: float = 10.0,
        label_selector: str | None = None,
    ) -> AsyncGenerator[JSONDict, None]:
        """Watch events (`type`, `object`) from `resource_version`, bookmarks allowed.

        The stream ends when the server closes it (after `timeout_seconds`). A line not seen
        within `inactivity_timeout` raises `Timeout`: a half-open connection otherwise hangs
        forever. An ERROR event is raised as the error it carries (410 as `Gone`). A line that
        is not a JSON object is logged and skipped; one over MAX_OBJECT_BYTES ends the stream
        with BadResponse.
        """
        query = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
        }
        timeout = aiohttp.ClientTimeout(sock_connect=connect_timeout, sock_read=inactivity_timeout)
        resp = await self._call("GET", kind.path(namespace), query=query, request_timeout=timeout)
        pending = bytearray()
        try:
            while True:
                end = pending.find(b"\n")
                if end >= 0:
                    line = bytes(pending[:end])
                    del pending[: end + 1]
                else:
                    if len(pending) > MAX_OBJECT_BYTES:
                        raise BadResponse(
                            f"a {kind.kind} watch event is over the cap of "
                            f"{MAX_OBJECT_BYTES // 2**20} MiB"
                        )
                    try:
                        async with asyncio.timeout(inactivity_timeout):
                            chunk = await resp.content.readany()
                    except TimeoutError as exc:
                        raise Timeout("watch stream inactive") from exc
                    except aiohttp.ClientError as exc:
                        raise Timeout(f"watch stream failed: {type(exc).__name__}") from exc
                    if chunk:
                        pending += chunk
                        continue
                    if not pending.strip():
                        return
                    line, pending = bytes(pending), bytearray()
                if not line.strip():
                    continue
                try:
                    event = decode_json(line, limit=MAX_OBJECT_BYTES, what="a watch event")
                except TooLarge as exc:
                    # Skipping it would leave its object stale in every cache: the stream ends
                    # with an error, and the watcher retries from the last event it applied.
                    raise BadResponse(f"{kind.kind} watch: {exc}") from None
                except DecodeError as exc:
                    log.warning("watch event skipped: %s", exc, extra={"kind": kind.kind})
                    continue
                if not isinstance(event, dict):
                    log.warning("malformed watch event skipped", extra={"kind": kind.kind})
                    continue
                if event.get("type") == "ERROR":
                    status = event.get("object")
                    status = status if isinstance(status, dict) else {}
                    code = status.get("code")
                    raise from_status(code if type(code) is int else 500, "", status)
                yield event
        finally:
            resp.close()
