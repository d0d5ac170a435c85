"""Fault injection and request accounting (docs/sandbox-kube.md#fault-injection).

Rules match a request by verb, resource and subresource (empty or "*" matches anything) and
inject an error with a probability (or for the next N matches) and/or latency. Watches can be
dropped, every history forced to 410, the whole server paused (requests held by a pause
resume when it ends), the control plane restarted (watches refused with 429 until the watch
caches are initialised again, then 410 for anything older), and bookmarks withheld, as a real
API server can leave a quiet watch silent for longer than a bookmark interval after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox.kube.clock import Clock, utcnow

Obj = dict[str, Any]


@dataclass
class FaultRule:
    verb: str = "*"
    resource: str = "*"
    subresource: str = "*"
    status: int = 0
    rate: float = 1.0
    count: int | None = None
    latency: float = 0.0
    id: int = 0
    message: str = ""
    spared: tuple[str, ...] = ()

    def matches(self, verb: str, *, resource: str, subresource: str) -> bool:
        return (
            self.verb in ("*", "", verb)
            and self.resource in ("*", "", resource)
            and self.subresource in ("*", subresource)
            and resource not in self.spared
        )

    def to_dict(self) -> Obj:
        return asdict(self)


class Faults:
    """In-process fault injection; the admin endpoint drives the same object."""

    def __init__(self, *, seed: int | None = None, clock: Clock = utcnow) -> None:
        self.rules: list[FaultRule] = []
        self._clock = clock
        self._random = random.Random(seed)
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._next_id = 0
        self.held = 0
        self.on_drop_watches: list[Any] = []
        self.on_force_gone: list[Any] = []
        self.on_restart: list[Any] = []
        self.on_initialized: list[Any] = []
        # While restarted: None until `initialized()`, else when the window ends.
        self._restarting = False
        self._ready_at: dt.datetime | None = None
        self._quiet_after_restart = 0.0
        # time.monotonic(), as the watch streams time their bookmarks.
        self._quiet_until = 0.0

    def inject(
        self,
        *,
        verb: str = "*",
        resource: str = "*",
        subresource: str = "*",
        status: int = 0,
        rate: float = 1.0,
        count: int | None = None,
        latency: float = 0.0,
        message: str = "",
        spared: tuple[str, ...] = (),
    ) -> FaultRule:
        """Add a rule: `status` (0 for none) with probability `rate`, at most `count` times,
        and `latency` seconds before answering. `message` replaces the Status message, for
        errors a client tells apart by it (a pod refused with `exceeded quota: ...`); the
        resources (plural) in `spared` never match."""
        self._next_id += 1
        rule = FaultRule(
            verb,
            resource,
            subresource,
            status,
            rate,
            count,
            latency,
            self._next_id,
            message,
            tuple(spared),
        )
        self.rules.append(rule)
        return rule

    def error_rate(
        self,
        rate: float,
        *,
        status: int = 500,
        verb: str = "*",
        resource: str = "*",
        subresource: str = "*",
    ) -> FaultRule:
        """Fail a fraction `rate` of the matching requests with `status`."""
        return self.inject(
            verb=verb, resource=resource, subresource=subresource, status=status, rate=rate
        )

    def latency(
        self, seconds: float, *, verb: str = "*", resource: str = "*", subresource: str = "*"
    ) -> FaultRule:
        """Delay every matching request by `seconds` before it is answered."""
        return self.inject(verb=verb, resource=resource, subresource=subresource, latency=seconds)

    def remove(self, rule: FaultRule) -> None:
        self.rules = [r for r in self.rules if r.id != rule.id]

    def clear(self) -> None:
        self.rules.clear()
        self.resume()
        self._quiet_until = 0.0
        if self._restarting:
            self.initialized()

    def pause(self) -> None:
        """Hold every API request (not the admin endpoint) until resume()."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def drop_watches(self) -> None:
        """Close every open watch connection abruptly, without an ERROR event."""
        for hook in self.on_drop_watches:
            hook()

    @contextlib.contextmanager
    def frozen_caches(self, resource: str) -> Iterator[None]:
        """While inside, every informer of `resource` keeps what it has: open watches are cut
        and each list and watch of it answered 500, so a controller's cache lags the writes
        that go through meanwhile (its own included) until the block ends."""
        rules = [
            self.inject(verb=verb, resource=resource, status=500) for verb in ("watch", "list")
        ]
        self.drop_watches()
        try:
            yield
        finally:
            for rule in rules:
                self.remove(rule)

    def force_gone(self) -> None:
        """Compact history: open watches get ERROR 410, older RVs and continue tokens 410."""
        for hook in self.on_force_gone:
            hook()

    def quiet(self, seconds: float) -> None:
        """For `seconds` from now (real time, as bookmarks are timed), watches send no bookmark:
        a watch of a resource nobody writes sends nothing at all."""
        self._quiet_until = max(self._quiet_until, time.monotonic() + seconds)

    def bookmarks_withheld(self) -> bool:
        return time.monotonic() < self._quiet_until

    def restart(self, seconds: float | None = None, *, quiet: float = 0.0) -> None:
        """Restart the control plane: open watches end as the old API server shuts down, and
        until `seconds` have passed on the emulator's clock (until `initialized()` when None)
        every watch, and every list the watch cache serves (one with a resourceVersion and no
        continue token), answers 429 `storage is (re)initializing` with `Retry-After: 1`. The
        new caches start from the current revision: older resourceVersions and continue tokens
        are 410 Expired. Writes, gets and plain lists go on meanwhile (etcd is up). With
        `quiet`, the new server sends no bookmark for that many seconds after its watch caches
        are initialised (`quiet()`), as a real one did for 70 s and more on quiet watches."""
        self._restarting = True
        self._quiet_after_restart = quiet
        self._ready_at = None if seconds is None else self._clock() + dt.timedelta(seconds=seconds)
        for hook in self.on_restart:
            hook()

    def initialized(self) -> None:
        """End a `restart` window now: the watch caches are initialised at the current revision."""
        self._restarting = False
        self._ready_at = None
        if self._quiet_after_restart:
            self.quiet(self._quiet_after_restart)
            self._quiet_after_restart = 0.0
        for hook in self.on_initialized:
            hook()

    def initializing(self) -> bool:
        """Whether the watch caches are still initialising after `restart`; the first call once
        the window has passed ends it (`initialized()`)."""
        if not self._restarting:
            return False
        if self._ready_at is not None and self._clock() >= self._ready_at:
            self.initialized()
            return False
        return True

    async def wait_resumed(self) -> None:
        if self._resumed.is_set():
            return
        self.held += 1
        try:
            await self._resumed.wait()
        finally:
            self.held -= 1

    def decide(self, verb: str, *, resource: str, subresource: str) -> tuple[int, float, str]:
        """The (status, latency, message) to apply to one request; status 0 means answer
        normally, an empty message the server's usual one."""
        status, delay, message = 0, 0.0, ""
        for rule in list(self.rules):
            if not rule.matches(verb, resource=resource, subresource=subresource):
                continue
            delay = max(delay, rule.latency)
            if rule.status and not status and self._random.random() < rule.rate:
                status, message = rule.status, rule.message
                if rule.count is not None:
                    rule.count -= 1
                    if rule.count <= 0:
                        self.remove(rule)
        return status, delay, message


@dataclass(frozen=True, slots=True)
class Request:
    verb: str
    resource: str
    subresource: str
    user: str
    namespace: str
    code: int
    path: str = ""
    content_type: str = ""


@dataclass
class Requests:
    """Accounting of every API request: verb, resource, subresource, identity, code, and the
    path with query and Content-Type (to assert, say, that patches are merge patches)."""

    log: list[Request] = field(default_factory=list)

    def record(self, req: Request) -> None:
        self.log.append(req)

    def count(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        user: str | None = None,
        namespace: str | None = None,
        code: int | None = None,
        content_type: str | None = None,
    ) -> int:
        return sum(
            1
            for r in self.log
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (subresource is None or r.subresource == subresource)
            and (user is None or r.user == user)
            and (namespace is None or r.namespace == namespace)
            and (code is None or r.code == code)
            and (content_type is None or r.content_type.split(";")[0].strip() == content_type)
        )

    def summary(self) -> dict[str, int]:
        """Counts keyed `verb resource[/subresource] user`."""
        c: Counter[str] = Counter()
        for r in self.log:
            res = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
            c[f"{r.verb} {res} {r.user}"] += 1
        return dict(c)

    def reset(self) -> None:
        self.log.clear()


def record_controller_request(
    requests: Requests | None,
    *,
    user: str,
    verb: str,
    resource: str,
    namespace: str,
    subresource: str = "",
    code: int = 200,
) -> None:
    """A request one of kube-controller-manager's emulated controllers makes as the real one
    would (they write to the store, not through the server), into `requests` when they are
    counted (None: not)."""
    if requests is not None:
        requests.record(
            Request(
                verb=verb,
                resource=resource,
                subresource=subresource,
                user=user,
                namespace=namespace,
                code=code,
            )
        )
