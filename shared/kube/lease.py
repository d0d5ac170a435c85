"""Leader election on a coordination.k8s.io/v1 Lease, the client-go way, written for asyncio.

Written here rather than taken from kubernetes_asyncio.leaderelection
(docs/controller-runtime.md#leader-election): that one lets connection errors escape, needs a
JSON body on every error, and stamps local naive times as UTC.

A candidate reads the Lease. It takes it when nobody holds it, when the holder released it (empty
`holderIdentity`), or when the record has not changed for `lease_duration` as measured on this
process's monotonic clock since it last saw the record change (so clocks of different machines
never need to agree). Every write is a PUT carrying the resourceVersion it read, so two
candidates cannot both win: the loser gets 409. The leader renews every `retry_period`, on the
Lease as it last wrote it without reading it first (client-go's fast path: a write by anyone
since fails with 409, and the leader reads and decides as a candidate); when no renewal has
succeeded for `renew_deadline` it gives up, which leaves `lease_duration -
renew_deadline` for its work (the controller's reconciles, the listener's message session) to
stop before anyone else can take the lease.

The leader can keep a few annotations on the Lease (`annotate`), written with its next renewal:
the listener records its message session there so that its successor can end it
(docs/listener.md#standby). `observed_annotations` are the Lease's annotations as last read,
before this process wrote them.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.clock import Clock, MonotonicClock
from shared.kube.errors import Conflict, KubeError, NotFound
from shared.kube.objects import LEASE, Objects
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str = "gha-runner-scale-set-controller"
    namespace: str = "default"
    lease_duration: float = 15.0
    """How long followers wait after the last renewal they saw before taking over."""
    renew_deadline: float = 10.0
    """How long the leader keeps trying to renew before it stops leading."""
    retry_period: float = 2.0
    """Interval between attempts to acquire or renew."""

    def validate(self) -> None:
        if not (self.lease_duration > self.renew_deadline > self.retry_period > 0):
            raise ValueError(
                "leader election needs lease-duration > renew-deadline > retry-period > 0"
            )


def _micro_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        *,
        objects: Objects,
        identity: str,
        settings: LeaseSettings,
        clock: Clock | None = None,
    ) -> None:
        settings.validate()
        self.identity = identity
        self.settings = settings
        self.is_leader = False
        self._objects = objects
        self._clock = clock or MonotonicClock()
        self._observed: tuple[object, ...] | None = None
        self._observed_at = 0.0
        self._annotations: dict[str, str] = {}
        self.observed_annotations: dict[str, str] = {}
        self._attempting = asyncio.Lock()
        self._written: JSONDict | None = None
        """The Lease as this process last wrote it: a leader renews on it without a GET."""

    def annotate(self, annotations: dict[str, str]) -> None:
        """Carry `annotations` on the Lease from the next successful write on."""
        self._annotations.update(annotations)

    def _spec(self, *, acquire: bool, previous: JSONDict) -> JSONDict:
        now = _micro_time(datetime.now(UTC))
        spec = dict(previous)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, math.ceil(self.settings.lease_duration)),
            renewTime=now,
        )
        if acquire:
            spec["acquireTime"] = now
            if previous.get("holderIdentity"):
                spec["leaseTransitions"] = int(previous.get("leaseTransitions") or 0) + 1
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; whether this process holds the lease afterwards."""
        s = self.settings
        written = self._written
        if self.is_leader and written is not None and self._clock.now() < self._valid_until():
            # client-go's fast path: a leader renews on what it last wrote, a PUT alone (a third
            # of a standby listener's Lease requests). A write by anyone since fails it with
            # 409 on the resourceVersion, and the read below decides.
            renewal = {**written, "spec": self._spec(acquire=False, previous=written["spec"])}
            if self._annotations:
                renewal["metadata"] = {
                    **written["metadata"],
                    "annotations": {
                        **(written["metadata"].get("annotations") or {}),
                        **self._annotations,
                    },
                }
            try:
                self._wrote(await self._objects.replace(LEASE, s.namespace, renewal))
            except KubeError:
                self._written = None
            else:
                return True
        try:
            lease = await self._objects.get(LEASE, s.namespace, s.name)
        except NotFound:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {
                    "name": s.name,
                    "namespace": s.namespace,
                    **({"annotations": dict(self._annotations)} if self._annotations else {}),
                },
                "spec": self._spec(acquire=True, previous={}),
            }
            try:
                self._wrote(await self._objects.create(LEASE, s.namespace, body))
            except Conflict:
                return False
            self.observed_annotations = {}
            return True
        spec = lease.get("spec") or {}
        metadata = lease.setdefault("metadata", {})
        self.observed_annotations = dict(metadata.get("annotations") or {})
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        now = self._clock.now()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        mine = holder == self.identity
        # The holder's own duration, as client-go reads it (a release writes 1 s).
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration)
        if holder and not mine and now < self._observed_at + duration:
            return False
        lease["spec"] = self._spec(acquire=not mine, previous=spec)
        if self._annotations:
            metadata["annotations"] = {**self.observed_annotations, **self._annotations}
        try:
            self._wrote(await self._objects.replace(LEASE, s.namespace, lease))
        except Conflict:
            return False
        return True

    def _wrote(self, lease: JSONDict) -> None:
        """Remember the Lease as written, its record as observed now."""
        spec = lease.get("spec") or {}
        self._written = lease
        self._observed = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("leaseTransitions"),
        )
        self._observed_at = self._clock.now()

    def _valid_until(self) -> float:
        return self._observed_at + self.settings.lease_duration

    async def _attempt(self, within: float | None = None) -> bool:
        """One attempt, given `within` seconds (a retry period unless said)."""
        within = self.settings.retry_period if within is None else within
        try:
            async with self._attempting, asyncio.timeout(within):
                return await self.try_acquire_or_renew()
        except KubeError as exc:
            log.warning("lease request failed", extra={"error": str(exc)})
            return False
        except TimeoutError:
            # TimeoutError's text is empty: say what timed out.
            log.warning("lease request failed", extra={"error": f"no answer within {within:g} s"})
            return False

    async def renew(self) -> bool:
        """One attempt now (with what `annotate` added) rather than at the next period."""
        return await self._attempt()

    async def acquire(self) -> None:
        """Return once this process holds the lease."""
        while not await self._attempt():
            await self._clock.sleep(self.settings.retry_period)
        self.is_leader = True
        log.info("became leader", extra={"identity": self.identity, "lease": self.settings.name})

    async def hold(self) -> None:
        """Renew until renewal fails for `renew_deadline`; then return, no longer leading."""
        last = self._clock.now()
        while True:
            await self._clock.sleep(self.settings.retry_period)
            # As client-go's renew loop, a renewal may take what is left of the renew deadline,
            # not one retry period: a slow answer in time is a renewal (a loaded API server
            # answering a 1 s retry period's request in 1.2 s cost the lease every time).
            left = self.settings.renew_deadline - (self._clock.now() - last)
            if left > 0 and await self._attempt(left):
                last = self._clock.now()
            elif self._taken_by_another() or (
                self._clock.now() - last >= self.settings.renew_deadline
            ):
                self.is_leader = False
                log.error("lost the lease", extra={"identity": self.identity})
                return

    def _taken_by_another(self) -> bool:
        holder = self._observed[0] if self._observed else None
        return bool(holder) and holder != self.identity

    async def release(self) -> None:
        """Clear the holder so a follower takes over at once instead of after the lease expires."""
        if not self.is_leader:
            return
        self.is_leader = False
        self._written = None
        try:
            async with asyncio.timeout(self.settings.renew_deadline):
                # Read afresh: a renewal that timed out here may still have landed on the server,
                # leaving the last answer we kept with a stale resourceVersion.
                lease = await self._objects.get(LEASE, self.settings.namespace, self.settings.name)
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return
                spec.pop("holderIdentity", None)
                spec.update(leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC)))
                await self._objects.replace(LEASE, self.settings.namespace, {**lease, "spec": spec})
        except (KubeError, TimeoutError) as exc:
            log.warning("could not release the lease", extra={"error": str(exc)})
        else:
            log.info("released the lease", extra={"identity": self.identity})
