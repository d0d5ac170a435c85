"""Authenticated and authorized metrics, as controller-runtime's
`filters.WithAuthenticationAndAuthorization` serves them (docs/security.md#metrics).

A scrape carries a bearer token (`Authorization: Bearer <token>`). The API server says who it
belongs to (a TokenReview) and whether that user may `get` the non-resource URL scraped (a
SubjectAccessReview, as for `/metrics` in a ClusterRole's `nonResourceURLs`). The answers:
401 without a token or with one the API server does not authenticate, 403 when RBAC does not allow
the user, 500 when a review cannot be made (the scrape fails; the next one asks again).

Reviews are cached as controller-runtime caches them: a token's review for a minute (either
way), an allowed access for five minutes, a denied one for 30 seconds. Tokens are cached under
an HMAC with a key of this process, never as themselves; no token reaches a log.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from kubernetes_asyncio.client import ApiClient, AuthenticationV1Api, AuthorizationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger(__name__)

TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
REVIEW_TIMEOUT = 10.0
CACHE_SIZE = 1024
"""Entries per cache; past it the oldest go first, so hostile tokens cannot grow memory."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """What to answer a scrape: 200 lets it through; otherwise the status and its body."""

    status: int
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOW = Decision(200)
UNAUTHORIZED = Decision(401, "Unauthorized")


class _ReviewFailed(Exception):
    pass


class _Expiring:
    """A bounded map whose entries expire, each after its own time to live."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> tuple[bool, Any]:
        found = self._entries.get(key)
        if found is None or found[0] <= self._clock():
            self._entries.pop(key, None)
            return False, None
        return True, found[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (self._clock() + ttl, value)
        while len(self._entries) > CACHE_SIZE:
            self._entries.popitem(last=False)


class MetricsAuth:
    """Decides each scrape with the API server's reviews, made by the identity of `api`."""

    def __init__(self, api: ApiClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._authentication = AuthenticationV1Api(api)
        self._authorization = AuthorizationV1Api(api)
        self._key = secrets.token_bytes(32)
        self._tokens = _Expiring(clock)
        self._access = _Expiring(clock)

    async def decide(self, *, authorization: str | None, method: str, path: str) -> Decision:
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return UNAUTHORIZED
        try:
            user = await self._authenticate(token)
            if user is None:
                return UNAUTHORIZED
        except _ReviewFailed as exc:
            log.error("metrics: a TokenReview failed: %s", exc)
            return Decision(500, "Authentication failed")
        verb = method.lower()
        try:
            allowed = await self._authorize(user, verb, path)
        except _ReviewFailed as exc:
            log.error("metrics: a SubjectAccessReview for %s failed: %s", user.name, exc)
            return Decision(500, f"Authorization for user {user.name} failed")
        if not allowed:
            log.debug("metrics: %s may not %s %s", user.name, verb, path)
            return Decision(403, f"Authorization denied for user {user.name}")
        return ALLOW

    async def _authenticate(self, token: str) -> User | None:
        key = hmac.new(self._key, token.encode(), hashlib.sha256).digest()
        cached, known = self._tokens.get(key)
        if cached:
            return cast(User | None, known)
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        review = await _call(self._authentication.create_token_review, body)
        status = review.status
        user: User | None = None
        if status is not None and status.authenticated and status.user is not None:
            info = status.user
            user = User(
                name=info.username or "",
                uid=info.uid or "",
                groups=tuple(info.groups or ()),
                extra=tuple(sorted((k, tuple(v or ())) for k, v in (info.extra or {}).items())),
            )
        self._tokens.put(key, user, TOKEN_TTL)
        return user

    async def _authorize(self, user: User, verb: str, path: str) -> bool:
        key = (user, verb, path)
        cached, allowed = self._access.get(key)
        if cached:
            return bool(allowed)
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        review = await _call(self._authorization.create_subject_access_review, body)
        allowed = bool(review.status is not None and review.status.allowed)
        self._access.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        return allowed


async def _call(create: Callable[..., Any], body: dict[str, Any]) -> Any:
    """A review's answer; _ReviewFailed with the status or the error's type, no body echoed."""
    try:
        return await create(body, _request_timeout=REVIEW_TIMEOUT)
    except ApiException as exc:
        raise _ReviewFailed(f"the API server answered {exc.status} {exc.reason}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _ReviewFailed(f"no answer from the API server ({type(exc).__name__})") from None
