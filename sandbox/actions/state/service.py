"""ServiceState: everything the emulated service knows, behind one object.

A thin facade: the tables and settings live in `ServiceData`, the behaviour per entity in
`ScaleSets`, `Sessions`, `Queues`, `Jobs` and `Runners`; the HTTP handlers, the admin API and
the simulated runners call the methods this object lends from them.
"""

from __future__ import annotations

from typing import Any

from sandbox.actions.credentials import CredentialStore
from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.jobs import Jobs
from sandbox.actions.state.queues import Queues
from sandbox.actions.state.records import (
    Job,
    MessageQueue,
    RequestRecord,
    Runner,
    RunnerGroup,
    ScaleSet,
    Session,
)
from sandbox.actions.state.runners import Runners
from sandbox.actions.state.scale_sets import ScaleSets
from sandbox.actions.state.sessions import Sessions


class ServiceState:
    """Everything the emulated service knows; handlers and simulated runners call its methods."""

    def __init__(
        self,
        *,
        credentials: CredentialStore,
        session_timeout: float,
        require_acquire: bool,
    ) -> None:
        self.data = data = ServiceData(
            credentials=credentials,
            session_timeout=session_timeout,
            require_acquire=require_acquire,
        )
        queues = Queues(data)
        jobs = Jobs(data, queues)
        sessions = Sessions(data, queues)
        runners = Runners(data, jobs)
        scale_sets = ScaleSets(data, jobs, sessions)
        # Change notification and shared reads.
        self.notify = data.notify
        self.wait_for = data.wait_for
        self.wait_changed = data.wait_changed
        self.statistics = data.statistics
        self.scale_set = data.scale_set
        self.scale_set_wire = data.scale_set_wire
        self.runner = data.runner
        # Runner groups and scale sets.
        self.add_runner_group = scale_sets.add_runner_group
        self.runner_groups_named = scale_sets.runner_groups_named
        self.find_scale_sets = scale_sets.find_scale_sets
        self.create_scale_set = scale_sets.create_scale_set
        self.update_scale_set = scale_sets.update_scale_set
        self.delete_scale_set = scale_sets.delete_scale_set
        # Sessions.
        self.active_session = sessions.active_session
        self.live_session = sessions.live_session
        self.create_session = sessions.create_session
        self.session = sessions.session
        self.refresh_session = sessions.refresh_session
        self.delete_session = sessions.delete_session
        self.evict_sessions = sessions.evict_sessions
        self.session_wire = sessions.session_wire
        # Messages.
        self.next_message = queues.next_message
        self.ack_message = queues.ack_message
        # Jobs.
        self.enqueue_job = jobs.enqueue_job
        self.acquire_jobs = jobs.acquire_jobs
        self.acquirable_jobs = jobs.acquirable_jobs
        self.cancel_job = jobs.cancel_job
        self.reoffer_job = jobs.reoffer_job
        self.start_job = jobs.start_job
        self.finish_job = jobs.finish_job
        # Runners.
        self.generate_jit_config = runners.generate_jit_config
        self.runners_named = runners.runners_named
        self.remove_runner = runners.remove_runner
        self.runner_online = runners.runner_online
        self.runner_offline = runners.runner_offline

    # -- tables and settings -------------------------------------------------------------

    @property
    def credentials(self) -> CredentialStore:
        return self.data.credentials

    @property
    def runner_groups(self) -> dict[int, RunnerGroup]:
        return self.data.runner_groups

    @property
    def scale_sets(self) -> dict[int, ScaleSet]:
        return self.data.scale_sets

    @property
    def sessions(self) -> dict[str, Session]:
        return self.data.sessions

    @property
    def queues(self) -> dict[int, MessageQueue]:
        return self.data.queues

    @property
    def jobs(self) -> dict[int, Job]:
        return self.data.jobs

    @property
    def runners(self) -> dict[int, Runner]:
        return self.data.runners

    @property
    def requests(self) -> list[RequestRecord]:
        return self.data.requests

    @property
    def session_timeout(self) -> float:
        return self.data.session_timeout

    @session_timeout.setter
    def session_timeout(self, value: float) -> None:
        self.data.session_timeout = value

    @property
    def require_acquire(self) -> bool:
        return self.data.require_acquire

    @require_acquire.setter
    def require_acquire(self, value: bool) -> None:
        self.data.require_acquire = value

    @property
    def service_url(self) -> str:
        return self.data.service_url

    @service_url.setter
    def service_url(self, value: str) -> None:
        self.data.service_url = value

    @property
    def message_queue_url(self) -> str:
        return self.data.message_queue_url

    @message_queue_url.setter
    def message_queue_url(self, value: str) -> None:
        self.data.message_queue_url = value

    @property
    def runner_version_deprecated(self) -> bool:
        return self.data.runner_version_deprecated

    @runner_version_deprecated.setter
    def runner_version_deprecated(self, value: bool) -> None:
        self.data.runner_version_deprecated = value

    # -- inspection ----------------------------------------------------------------------

    def count(
        self,
        endpoint: str | None = None,
        *,
        method: str | None = None,
        status: int | None = None,
    ) -> int:
        """How many requests matched; the fields left None match anything."""
        return sum(
            1
            for r in self.requests
            if (endpoint is None or r.endpoint == endpoint)
            and (method is None or r.method == method)
            and (status is None or r.status == status)
        )

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able picture of the state (no secrets) for the admin API."""
        return {
            "runnerGroups": [
                g.to_wire(self.data.group_size(g.id)) for g in self.runner_groups.values()
            ],
            "scaleSets": [self.scale_set_wire(s) for s in self.scale_sets.values()],
            "sessions": [
                {
                    "sessionId": s.id,
                    "runnerScaleSetId": s.scale_set_id,
                    "ownerName": s.owner_name,
                    "maxCapacity": s.max_capacity,
                }
                for s in self.sessions.values()
            ],
            "jobs": [
                {
                    "runnerRequestId": j.id,
                    "state": j.state,
                    "runnerScaleSetId": j.scale_set_id,
                    "runnerId": j.runner_id,
                    "runnerName": j.runner_name,
                    "labels": j.labels,
                    "result": j.final_result,
                }
                for j in self.jobs.values()
            ],
            "runners": [
                {**r.to_wire(), "online": r.online, "jobRequestId": r.job_id}
                for r in self.runners.values()
            ],
            "queues": {
                str(sid): {
                    "pendingJobMessages": len(q.pending),
                    "unackedMessages": sorted(q.messages),
                }
                for sid, q in self.queues.items()
            },
            "requestCount": len(self.requests),
            "runnerVersionDeprecated": self.runner_version_deprecated,
        }
