"""Message sessions: at most one live session per scale set, expiring when unused."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.queues import Queues
from sandbox.actions.state.records import (
    EX_SESSION_CONFLICT,
    EX_SESSION_EXPIRED,
    EX_SESSION_NOT_FOUND,
    ServiceError,
    Session,
)


class Sessions:
    def __init__(self, data: ServiceData, queues: Queues) -> None:
        self.data = data
        self.queues = queues

    def _expired(self, session: Session) -> bool:
        return (
            session.polls_in_flight == 0
            and time.monotonic() - session.last_seen > self.data.session_timeout
        )

    def active_session(self, scale_set_id: int) -> Session | None:
        for session in list(self.data.sessions.values()):
            if session.scale_set_id != scale_set_id:
                continue
            if self._expired(session):
                self.drop(session)
                continue
            return session
        return None

    def live_session(self, session_id: str) -> Session | None:
        """The session if it exists and has not expired (an expired one is dropped)."""
        session = self.data.sessions.get(session_id)
        if session is not None and self._expired(session):
            self.drop(session)
            return None
        return session

    def drop(self, session: Session) -> None:
        self.data.sessions.pop(session.id, None)
        self.data.credentials.revoke_session_tokens(session.id)

    def _issue_message_queue_token(self, session_id: str) -> str:
        return self.data.credentials.issue(
            "message_queue",
            ttl=self.data.credentials.message_queue_token_ttl,
            session_id=session_id,
        )

    def create_session(self, scale_set_id: int, *, owner_name: str) -> Session:
        scale_set = self.data.scale_set(scale_set_id)
        if self.active_session(scale_set_id) is not None:
            raise ServiceError(
                409,
                EX_SESSION_CONFLICT,
                f"The actions runner scaleset {scale_set.name} already has an active session.",
            )
        session_id = str(uuid.uuid4())
        session = Session(
            id=session_id,
            scale_set_id=scale_set_id,
            owner_name=owner_name,
            message_queue_token=self._issue_message_queue_token(session_id),
            last_seen=time.monotonic(),
        )
        self.data.sessions[session.id] = session
        for job in self.data.jobs.values():
            available = job.scale_set_id == scale_set_id and job.state == "available"
            if available and not job.offer_outstanding:
                self.queues.emit(job, "JobAvailable")
        self.data.notify()
        return session

    def session(self, scale_set_id: int, session_id: str) -> Session:
        session = self.data.sessions.get(session_id)
        if session is None or session.scale_set_id != scale_set_id:
            raise ServiceError(
                404,
                EX_SESSION_NOT_FOUND,
                f"Runner scale set {scale_set_id} has no session ID {session_id}; "
                "a session ID that doesn't exist cannot be used.",
            )
        if self._expired(session):
            self.drop(session)
            raise ServiceError(
                400,
                EX_SESSION_EXPIRED,
                f"The session identifier {session_id} is not valid; it has expired.",
            )
        return session

    def refresh_session(self, scale_set_id: int, session_id: str) -> Session:
        session = self.session(scale_set_id, session_id)
        self.data.credentials.revoke_session_tokens(session.id)
        session.message_queue_token = self._issue_message_queue_token(session.id)
        session.last_seen = time.monotonic()
        self.data.notify()
        return session

    def delete_session(self, scale_set_id: int, session_id: str) -> None:
        self.drop(self.session(scale_set_id, session_id))
        self.data.notify()

    def evict_sessions(self, scale_set_id: int | None = None) -> int:
        """Forget sessions as the service does when it expires them; returns how many."""
        evicted = [s for s in self.data.sessions.values() if scale_set_id in (None, s.scale_set_id)]
        for session in evicted:
            self.drop(session)
        self.data.notify()
        return len(evicted)

    def session_wire(self, session: Session) -> dict[str, Any]:
        scale_set = self.data.scale_set(session.scale_set_id)
        return {
            "sessionId": session.id,
            "ownerName": session.owner_name,
            "runnerScaleSet": self.data.scale_set_wire(scale_set),
            "messageQueueUrl": f"{self.data.message_queue_url}?sessionId={session.id}",
            "messageQueueAccessToken": session.message_queue_token,
            "statistics": self.data.statistics(session.scale_set_id),
        }
