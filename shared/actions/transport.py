"""HTTP for the Actions client: one aiohttp session, proxy and CA, timeouts and retries."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import tenacity
import yarl
from multidict import CIMultiDictProxy

from shared.actions.errors import (
    ActionsConnectionError,
    InvalidArgument,
    UnexpectedResponse,
    scrub,
)
from shared.backoff import doubling
from shared.proxy import no_proxy_covers, proxy_variable
from shared.retryafter import retry_after_seconds
from shared.wire import DecodeError, decode_json, read_capped

log = logging.getLogger("shared.actions")

BOM = b"\xef\xbb\xbf"
MAX_RESPONSE_BYTES = 4 * 2**20
"""The cap on any response body (docs/actions-client.md#limits): a message batch holds at most
some hundreds of job messages of about a kilobyte each, a JIT config a few kilobytes."""
RETRY_STATUSES = frozenset({429, *range(500, 600)} - {501})
"""Statuses retried on every call: rate limited, and server errors except Not Implemented."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed attempts are retried (go-retryablehttp's defaults, as the Go client uses).

    Attempt `i` (0-based) that fails with a network error, 429 or a 5xx other than 501 waits
    `min(wait_min * 2**i, wait_max)`, or the response's `Retry-After` (seconds or HTTP date,
    capped at `retry_after_max`) before the next one, up to `attempts` in all. Tests shrink the
    waits or pass a `sleep` that records them.
    """

    attempts: int = 5
    wait_min: float = 1.0
    wait_max: float = 30.0
    retry_after_max: float = 300.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidArgument("RetryPolicy.attempts must be at least 1")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """HTTP(S)_PROXY / NO_PROXY, chosen per request URL.

    NO_PROXY as `shared.proxy` reads it, for the Kubernetes client too.
    """

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProxySettings:
        """Upper-case names first, then lower-case, as Go's httpproxy does."""

        return cls(
            http_proxy=proxy_variable(env, "http_proxy"),
            https_proxy=proxy_variable(env, "https_proxy"),
            no_proxy=proxy_variable(env, "no_proxy"),
        )

    @property
    def enabled(self) -> bool:
        return bool(self.http_proxy or self.https_proxy)

    @property
    def passwords(self) -> frozenset[str]:
        """Passwords embedded in the proxy URLs (`http://user:password@proxy:3128`)."""
        found = set()
        for proxy in (self.http_proxy, self.https_proxy):
            password = urlsplit(proxy if "://" in proxy else f"http://{proxy}").password
            if password:
                found.add(password)
        return frozenset(found)

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL to use for `url`, or None to connect directly."""
        parts = urlsplit(url)
        proxy = self.https_proxy if parts.scheme == "https" else self.http_proxy
        if not proxy or no_proxy_covers(parts.hostname or "", parts.port, self.no_proxy):
            return None
        return proxy if "://" in proxy else f"http://{proxy}"


def ssl_context(root_ca_pem: str | bytes | None) -> ssl.SSLContext | bool:
    """The system trust store, plus `root_ca_pem` (one or more PEM certificates) when given.

    Without one, `True`: aiohttp's own context on the system trust store, which it builds when
    imported; another copy of the store would cost about 0.8 MB (docs/listener.md#memory).
    A custom bundle may hold an intermediate rather than the root, so partial chains are accepted
    when one is configured.
    """
    if not root_ca_pem:
        return True
    context = ssl.create_default_context()
    # Bytes would be read as DER: PEM is text either way.
    pem = root_ca_pem.decode("ascii", "replace") if isinstance(root_ca_pem, bytes) else root_ca_pem
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidArgument(
            f"the server root CA is not a valid PEM certificate bundle ({exc.__class__.__name__})"
        ) from exc
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


@dataclass(frozen=True, slots=True)
class SystemInfo:
    """Identity sent in the User-Agent (the Go client's SystemInfo keys, in its order)."""

    system: str = "gha-runner-scaler"
    version: str = "unknown"
    commit_sha: str = "unknown"
    scale_set_id: int = 0
    subsystem: str = ""


def user_agent(info: SystemInfo, *, build_version: str) -> str:
    """The compact JSON object the Go client sends as User-Agent."""
    return json.dumps(
        {
            "system": info.system,
            "version": info.version,
            "commit_sha": info.commit_sha,
            "scale_set_id": info.scale_set_id,
            "subsystem": info.subsystem,
            "build_version": build_version,
            "build_commit_sha": build_version,
            "kind": "scaleset",
        },
        separators=(",", ":"),
    )


@dataclass(frozen=True, slots=True)
class Response:
    """A fully read response; `body` has any UTF-8 BOM removed."""

    method: str
    url: str
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes
    attempts: int

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def empty(self) -> bool:
        return not self.body.strip()

    def json(self) -> Any:
        """The decoded body; raises UnexpectedResponse when it is not JSON (shared.wire)."""
        try:
            return decode_json(self.body, limit=MAX_RESPONSE_BYTES, what="the body")
        except DecodeError as exc:
            raise UnexpectedResponse(
                f"{self.method} {self.url} answered {self.status} with a body that is not "
                f"JSON ({exc.detail})"
            ) from None


def _retryable_exception(exc: BaseException) -> bool:
    if isinstance(
        exc,
        aiohttp.ClientConnectorCertificateError
        | aiohttp.InvalidURL
        | aiohttp.TooManyRedirects
        | ssl.SSLCertVerificationError,
    ):
        return False
    return isinstance(exc, aiohttp.ClientError | TimeoutError)


class Transport:
    """One aiohttp ClientSession (created on first use, in the running loop) and the retry loop."""

    def __init__(
        self,
        *,
        retry: RetryPolicy,
        proxy: ProxySettings,
        ssl_ctx: ssl.SSLContext | bool,
        user_agent: str,
        request_timeout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.retry = retry
        self.proxy = proxy
        self.user_agent = user_agent
        self.request_timeout = request_timeout
        self._ssl = ssl_ctx
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _client(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the Actions client is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl),
                trust_env=False,
            )
        return self._session

    async def aclose(self) -> None:
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        attempt = state.attempt_number - 1
        backoff = doubling(self.retry.wait_min, attempt, self.retry.wait_max)
        outcome = state.outcome
        if outcome is None or outcome.failed:
            return backoff
        response: Response = outcome.result()
        header = response.headers.get("Retry-After")
        if header is None:
            return backoff
        delay = retry_after_seconds(header, now=self._clock())
        return backoff if delay is None else min(delay, self.retry.retry_after_max)

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        attempt_timeout: float | None = None,
        also_retry: Collection[int] = (),
        secrets: frozenset[str] = frozenset(),
    ) -> Response:
        """Send with retries; returns the last response, whatever its status.

        Raises ActionsConnectionError when no attempt got an answer. `also_retry` adds statuses
        to retry (runner-registration also retries 401 and 403).
        """
        retry_statuses = RETRY_STATUSES | frozenset(also_retry)
        all_headers = {"User-Agent": self.user_agent, **headers}
        client = self._client()
        target = yarl.URL(url, encoded=True)
        proxy = self.proxy.proxy_for(url)
        client_timeout = aiohttp.ClientTimeout(total=attempt_timeout or self.request_timeout)
        attempts = 0

        async def attempt() -> Response:
            nonlocal attempts
            attempts += 1
            async with client.request(
                method,
                target,
                headers=all_headers,
                data=body,
                proxy=proxy,
                timeout=client_timeout,
                max_redirects=10,
            ) as resp:
                try:
                    raw = await read_capped(resp, limit=MAX_RESPONSE_BYTES, what="the body")
                except DecodeError as exc:
                    raise UnexpectedResponse(
                        scrub(f"{method} {url} answered {resp.status}: {exc}", secrets)
                    ) from None
            log.debug(
                "%s %s -> %d (attempt %d)", method, scrub(url, secrets), resp.status, attempts
            )
            return Response(
                method=method,
                url=url,
                status=resp.status,
                headers=resp.headers,
                body=raw.removeprefix(BOM),
                attempts=attempts,
            )

        def give_up(state: tenacity.RetryCallState) -> Response:
            assert state.outcome is not None
            result: Response = state.outcome.result()
            return result

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=(
                tenacity.retry_if_exception(_retryable_exception)
                | tenacity.retry_if_result(lambda r: r.status in retry_statuses)
            ),
            sleep=self.retry.sleep,
            retry_error_callback=give_up,
            before_sleep=lambda s: log.info(
                "%s %s: attempt %d failed (%s); retrying",
                method,
                scrub(url, secrets),
                s.attempt_number,
                _describe(s),
            ),
        )
        try:
            result: Response = await retrying(attempt)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ActionsConnectionError(
                scrub(
                    f"{method} {url} failed after {attempts} attempt(s): "
                    f"{type(exc).__name__}: {exc}",
                    secrets,
                )
            ) from exc
        return result


def _describe(state: tenacity.RetryCallState) -> str:
    outcome = state.outcome
    if outcome is None:
        return "no outcome"
    if outcome.failed:
        return type(outcome.exception()).__name__
    response: Response = outcome.result()
    return f"status {response.status}"
