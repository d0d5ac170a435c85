"""The tables of the Actions service's state, its settings, the change notification every
mutation ends with, and the reads that several entities share.

All mutations are synchronous and happen on the event loop, so no locks are needed; every
mutation ends with `notify`, which checks each waiter's condition (`wait_for`, long polls,
simulated runners) and wakes only those whose condition now holds: with thousands of idle
simulated runners waiting for a job, resuming every one of them on every mutation made a burst
quadratic (docs/sandbox-actions.md, Inspection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.actions.credentials import CredentialStore
from sandbox.actions.state.records import (
    DEFAULT_RUNNER_GROUP_ID,
    EX_AGENT_NOT_FOUND,
    EX_SCALE_SET_NOT_FOUND,
    Job,
    MessageQueue,
    RequestRecord,
    Runner,
    RunnerGroup,
    ScaleSet,
    ServiceError,
    Session,
    rfc3339,
)


@dataclass(eq=False, slots=True)
class _Waiter:
    condition: Callable[[], bool]
    woken: asyncio.Future[None]


def _always() -> bool:
    return True


class ServiceData:
    def __init__(
        self,
        *,
        credentials: CredentialStore,
        session_timeout: float,
        require_acquire: bool,
    ) -> None:
        self.credentials = credentials
        self.session_timeout = session_timeout
        self.require_acquire = require_acquire
        self.service_url = ""
        self.message_queue_url = ""
        self.runner_groups: dict[int, RunnerGroup] = {
            DEFAULT_RUNNER_GROUP_ID: RunnerGroup(DEFAULT_RUNNER_GROUP_ID, "Default")
        }
        self.scale_sets: dict[int, ScaleSet] = {}
        self.sessions: dict[str, Session] = {}
        self.queues: dict[int, MessageQueue] = {}
        self.jobs: dict[int, Job] = {}
        self.runners: dict[int, Runner] = {}
        self.requests: list[RequestRecord] = []
        self.runner_version_deprecated = False
        # In the order they started waiting, which is the order they are woken in.
        self._waiters: dict[_Waiter, None] = {}
        self.next_scale_set_id = 1
        self.next_runner_group_id = 2
        self.next_message_id = 1
        self.next_job_id = 1001
        self.next_runner_id = 1
        self.next_workflow_run_id = 9001

    # -- change notification -------------------------------------------------------------

    def notify(self) -> None:
        """A mutation happened: wake the waiters whose condition holds now (a condition that
        raises wakes its waiter with the exception, as it would have raised in its task)."""
        for waiter in list(self._waiters):
            if waiter.woken.done():
                continue
            try:
                holds = waiter.condition()
            except Exception as exc:
                waiter.woken.set_exception(exc)
                continue
            if holds:
                waiter.woken.set_result(None)

    async def _woken(self, condition: Callable[[], bool]) -> None:
        """Until a mutation finds `condition()` true."""
        waiter = _Waiter(condition, asyncio.get_running_loop().create_future())
        self._waiters[waiter] = None
        try:
            await waiter.woken
        finally:
            del self._waiters[waiter]

    async def wait_for(self, predicate: Callable[[], bool], *, within: float | None) -> None:
        """Return once `predicate()` holds; TimeoutError after `within` seconds (None: never)."""
        async with asyncio.timeout(within):
            # Checked again once woken: a later mutation in the same loop turn may undo it.
            while not predicate():
                await self._woken(predicate)

    async def wait_changed(self, *, within: float) -> None:
        """Wait for the next mutation, or `within` seconds, whichever comes first."""
        try:
            async with asyncio.timeout(within):
                await self._woken(_always)
        except TimeoutError:
            return

    # -- shared reads --------------------------------------------------------------------

    def scale_set(self, scale_set_id: int) -> ScaleSet:
        scale_set = self.scale_sets.get(scale_set_id)
        if scale_set is None:
            raise ServiceError(
                404, EX_SCALE_SET_NOT_FOUND, f"The runner scale set {scale_set_id} does not exist."
            )
        return scale_set

    def runner(self, runner_id: int) -> Runner:
        runner = self.runners.get(runner_id)
        if runner is None:
            raise ServiceError(404, EX_AGENT_NOT_FOUND, f"No runner with ID {runner_id} exists.")
        return runner

    def statistics(self, scale_set_id: int) -> dict[str, int]:
        jobs = [j for j in self.jobs.values() if j.scale_set_id == scale_set_id]
        runners = [r for r in self.runners.values() if r.scale_set_id == scale_set_id]
        busy = sum(1 for r in runners if r.job_id is not None)
        return {
            "totalAvailableJobs": sum(1 for j in jobs if j.state == "available"),
            "totalAcquiredJobs": sum(1 for j in jobs if j.state == "acquired"),
            "totalAssignedJobs": sum(1 for j in jobs if j.state in ("assigned", "started")),
            "totalRunningJobs": sum(1 for j in jobs if j.state == "started"),
            "totalRegisteredRunners": len(runners),
            "totalBusyRunners": busy,
            "totalIdleRunners": len(runners) - busy,
        }

    def group_size(self, group_id: int) -> int:
        return sum(1 for s in self.scale_sets.values() if s.runner_group_id == group_id)

    def scale_set_wire(self, scale_set: ScaleSet) -> dict[str, Any]:
        return {
            "id": scale_set.id,
            "name": scale_set.name,
            "runnerGroupId": scale_set.runner_group_id,
            "runnerGroupName": self.runner_groups[scale_set.runner_group_id].name,
            "labels": scale_set.labels,
            "RunnerSetting": scale_set.runner_setting,
            "createdOn": rfc3339(scale_set.created_on),
            "runnerJitConfigUrl": (
                f"{self.service_url}_apis/runtime/runnerscalesets/{scale_set.id}/generatejitconfig"
            ),
            "statistics": self.statistics(scale_set.id),
        }
