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

from shared.kube.errors import KubeError
from shared.kube.objects import (
    SUBJECT_ACCESS_REVIEW,
    TOKEN_REVIEW,
    Api,
    Kind,
    Objects,
)
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

TOKEN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
REVIEW_TIMEOUT = 10.0
CACHE_SIZE = 1024
"""Entries per cache; past it the oldest go first, so hostile tokens cannot grow memory."""
REVIEWS = (TOKEN_REVIEW, SUBJECT_ACCESS_REVIEW)
"""What the serving identity asks the API server, `create` of each; manifests/metrics-auth/
grants both."""


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
    """Decides each scrape with the API server's reviews, made by the identity of `api` (the
    controller's kubernetes-asyncio client or the listener's light one)."""

    def __init__(self, api: Api, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._objects = Objects(api, timeout=REVIEW_TIMEOUT)
        self._key = secrets.token_bytes(32)
        self._tokens = _Expiring(clock)
        self._access = _Expiring(clock)

    async def missing_rights(self) -> str | None:
        """What this identity lacks to review scrapes, in one line saying what to bind; None
        when it may create both reviews. Asked at start (a SelfSubjectAccessReview each, which
        any identity may make), so that a missing binding stops the process with its name
        instead of failing every scrape. When the API server cannot be asked, a warning and None:
        each scrape then asks for itself (500 while it cannot)."""
        missing = []
        for kind in REVIEWS:
            attributes = {"verb": "create", "group": kind.group, "resource": kind.plural}
            try:
                allowed = await self._objects.allowed(attributes)
            except KubeError as exc:
                log.warning("metrics: cannot ask whether this identity may review scrapes: %s", exc)
                return None
            if not allowed:
                missing.append(f"create {kind.plural}.{kind.group}")
        if not missing:
            return None
        return (
            f"metrics auth is on, but this identity may not {' or '.join(missing)}: bind the "
            "ClusterRole gha-controller-metrics-auth to it (manifests/metrics-auth/)"
        )

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
        status = (await self._review(TOKEN_REVIEW, body)).get("status") or {}
        info = status.get("user") or {}
        user: User | None = None
        if status.get("authenticated") is True and isinstance(info, dict):
            extra = info.get("extra") or {}
            user = User(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(map(str, v or ()))) for k, v in extra.items())),
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
        status = (await self._review(SUBJECT_ACCESS_REVIEW, body)).get("status") or {}
        allowed = status.get("allowed") is True
        self._access.put(key, allowed, ALLOW_TTL if allowed else DENY_TTL)
        return allowed

    async def _review(self, kind: Kind, body: JSONDict) -> JSONDict:
        """A review's answer; _ReviewFailed with the status or the error's kind, no body
        echoed."""
        try:
            return await self._objects.create(kind, None, body)
        except KubeError as exc:
            if exc.code:
                raise _ReviewFailed(f"the API server answered {exc.code}") from None
            raise _ReviewFailed(f"no answer from the API server ({type(exc).__name__})") from None
