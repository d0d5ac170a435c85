"""Fault injection: per-endpoint error rates and counts, latency, empty bodies, token expiry.

Rates draw from a seeded generator so a test with a rate below 1 is still reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sandbox.actions.credentials import CredentialStore, TokenKind
from sandbox.actions.state.service import ServiceState

# The names a fault can target; "*" targets every endpoint. They match RequestRecord.endpoint.
ENDPOINTS = (
    "access_token",
    "registration_token",
    "runner_registration",
    "get_scale_set_by_name",
    "get_scale_set",
    "create_scale_set",
    "update_scale_set",
    "delete_scale_set",
    "get_runner_group",
    "create_session",
    "refresh_session",
    "delete_session",
    "get_message",
    "delete_message",
    "acquire_jobs",
    "acquirable_jobs",
    "generate_jit_config",
    "get_runner",
    "get_runner_by_name",
    "remove_runner",
)


@dataclass
class Fault:
    """What to do instead of (or before) serving a request to `endpoint`.

    `status` replaces the response (None = serve normally after `latency`); a 200 status with
    `empty_body` answers an empty 200. `count` bounds how many requests it hits (None = no
    bound), `rate` is the probability each matching request is hit.
    """

    endpoint: str
    status: int | None = None
    rate: float = 1.0
    count: int | None = None
    retry_after: str | None = None
    latency: float = 0.0
    empty_body: bool = False
    body: str | None = None
    content_type: str = "application/json"
    hits: int = 0

    def exhausted(self) -> bool:
        return self.count is not None and self.hits >= self.count

    def to_wire(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "status": self.status,
            "rate": self.rate,
            "count": self.count,
            "retryAfter": self.retry_after,
            "latency": self.latency,
            "emptyBody": self.empty_body,
            "hits": self.hits,
        }


@dataclass
class Faults:
    """The fault switchboard of one emulator (`gh.faults`)."""

    state: ServiceState
    credentials: CredentialStore
    seed: int = 0
    active: list[Fault] = field(default_factory=list)
    runner_crash_exit_code: int | None = None
    bom: bool = False

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def inject(
        self,
        endpoint: str,
        *,
        status: int | None = None,
        rate: float = 1.0,
        count: int | None = None,
        retry_after: float | str | None = None,
        latency: float = 0.0,
        empty_body: bool = False,
        body: str | None = None,
        content_type: str = "application/json",
    ) -> Fault:
        """Add a fault; returns it so a test can read `hits` or `remove()` it."""
        if endpoint != "*" and endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}; one of {', '.join(ENDPOINTS)}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        if empty_body and status not in (None, 200):
            raise ValueError("empty_body answers a 200; leave status unset or 200")
        fault = Fault(
            endpoint=endpoint,
            status=200 if empty_body else status,
            rate=rate,
            count=count,
            retry_after=None if retry_after is None else str(retry_after),
            latency=latency,
            empty_body=empty_body,
            body=body,
            content_type=content_type,
        )
        self.active.append(fault)
        return fault

    def remove(self, fault: Fault) -> None:
        if fault in self.active:
            self.active.remove(fault)

    def clear(self) -> None:
        self.active.clear()
        self.runner_crash_exit_code = None
        self.bom = False

    def pick(self, endpoint: str) -> Fault | None:
        """The first live fault that fires for this request, counting the hit."""
        for fault in self.active:
            if fault.endpoint not in ("*", endpoint) or fault.exhausted():
                continue
            if fault.rate < 1.0 and self._random.random() >= fault.rate:
                continue
            fault.hits += 1
            return fault
        return None

    def expire_tokens(self, kind: TokenKind | None = None) -> int:
        """Expire the issued tokens of a kind (all when None) now; clients then get 401."""
        return self.credentials.expire(kind)

    def evict_sessions(self, scale_set_id: int | None = None) -> int:
        """Drop sessions as the service does on expiry: their MQ token then answers 401."""
        return self.state.evict_sessions(scale_set_id)

    def crash_runners(self, exit_code: int | None = 1) -> None:
        """Simulated runners that come online from now exit with this code before any job
        (None restores normal runners)."""
        self.runner_crash_exit_code = exit_code
