"""Listener standby (docs/listener.md#standby): replicas of one scale set's listener share a
Lease; the holder runs the listener, the others wait and take over when it dies.

The holder writes its message session's id on the Lease (`SESSION_ANNOTATION`). Its successor
deletes that session before creating its own: the service allows one session per scale set and
keeps an abandoned one for minutes, so without this a listener taking over after a SIGKILL would
meet 409 conflicts until the old session expired. The Lease's timing guarantees that the old
holder has stopped listening by then (it gives up after `renew_deadline`, the standby waits
`lease_duration`).

Losing the Lease (renewals failing for `renew_deadline`, or another replica holding it) stops
the listener as SIGTERM would (the batch in hand is finished, the session deleted), and the
replica stands by again rather than exit. SIGTERM releases the Lease so that a standby takes over
at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable

from listener.config import ListenerSettings
from listener.health import Progress
from shared.kube.lease import LeaderElector, LeaseSettings
from shared.kube.objects import Objects

log = logging.getLogger(__name__)

SESSION_ANNOTATION = "gha-runner-scaler/message-session"
"""On the Lease: the id of the holder's message session (not a secret: deleting or using a
session takes the scale set's credentials)."""


class SessionHandoff:
    """What a leader's listener learns from the Lease and tells it about its session."""

    def __init__(self, elector: LeaderElector) -> None:
        self._elector = elector
        self._previous = elector.observed_annotations.get(SESSION_ANNOTATION) or None

    def take_previous_session(self) -> str | None:
        """The previous holder's session id, once: the session to delete before opening one."""
        previous, self._previous = self._previous, None
        return previous

    async def session_opened(self, session_id: str) -> None:
        """Record the session on the Lease now, so a successor can end it."""
        self._elector.annotate({SESSION_ANNOTATION: session_id})
        if not await self._elector.renew():
            log.warning("could not record message session %s on the Lease yet", session_id)


Lead = Callable[[asyncio.Event, SessionHandoff], Awaitable[None]]
"""Runs the listener until the event is set; given the handoff of this term."""


def elector_of(settings: ListenerSettings, objects: Objects) -> LeaderElector:
    """The Lease candidate of one replica; identity: the host name (the pod's name) and a
    random part, as two containers on one host share a host name."""
    return LeaderElector(
        objects=objects,
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        settings=LeaseSettings(
            name=settings.standby_lease_name,
            namespace=settings.ephemeral_runner_set_namespace,
            lease_duration=settings.standby_lease_duration_seconds,
            renew_deadline=settings.standby_renew_deadline_seconds,
            retry_period=settings.standby_retry_period_seconds,
        ),
    )


async def _first(main: Awaitable[object], stop: asyncio.Event) -> bool:
    """Await `main` unless `stop` is set first; whether `main` finished."""
    task = asyncio.ensure_future(main)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, stopping, return_exceptions=True)
    if task.done() and not task.cancelled():
        task.result()
        return True
    return False


def _end_term(term: asyncio.Event, _: object) -> None:
    term.set()


async def stand_by_and_lead(
    elector: LeaderElector, *, lead: Lead, progress: Progress, stop: asyncio.Event
) -> None:
    """Wait for the Lease, run `lead` while holding it, stand by again when it is lost; return
    once `stop` is set (the Lease released). An exception of `lead` releases the Lease too."""
    while not stop.is_set():
        progress.standing_by()
        log.info(
            "standing by for Lease %s/%s as %s",
            elector.settings.namespace,
            elector.settings.name,
            elector.identity,
        )
        if not await _first(elector.acquire(), stop):
            return
        term = asyncio.Event()
        holding = asyncio.ensure_future(elector.hold())
        holding.add_done_callback(functools.partial(_end_term, term))
        stopping = asyncio.ensure_future(stop.wait())
        stopping.add_done_callback(functools.partial(_end_term, term))
        try:
            await lead(term, SessionHandoff(elector))
        finally:
            stopping.cancel()
            lost = holding.done()
            holding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holding
            if not lost:
                await elector.release()
        if lost:
            log.warning("lost the Lease; the listener stopped and stands by again")
