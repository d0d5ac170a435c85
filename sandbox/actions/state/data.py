"""The tables of the Actions service's state, its settings, the change notification every
mutation ends with, and the reads that several entities share.

All mutations are synchronous and happen on the event loop, so no locks are needed; every
mutation ends with `notify`, which checks waiters' conditions (`wait_for`, long polls, simulated
runners) and wakes only those whose condition now holds: with thousands of idle simulated runners
waiting for a job, resuming every one of them on every mutation made a burst quadratic. A waiter
may also name what its condition reads (`key`: a runner or a job); it is then checked only after a
mutation that `touch`ed that key, so that one mutation costs O(1) checks however many runners
wait, not one per waiting runner (docs/sandbox-actions.md, Inspection).
"""

from __future__ import annotations

import asyncio
import heapq
from collections import Counter
from collections.abc import Callable, Hashable
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


class RunnerTable(dict[int, Runner]):
    """The registered runners by id, with an index by name (case-insensitive, as the service
    compares them) kept in step, so that a JIT config's unique-name check is one lookup instead
    of a walk over every runner."""

    def __init__(self, on_removed: Callable[[int], None]) -> None:
        super().__init__()
        self._by_name: dict[str, Runner] = {}
        self._on_removed = on_removed
        self.per_set: Counter[int] = Counter()
        """Registered runners by scale set."""
        self.busy: Counter[int] = Counter()
        """Registered runners with a job, by scale set (kept by `Runner.__setattr__`)."""

    def __setitem__(self, runner_id: int, runner: Runner) -> None:
        if runner_id in self:
            del self[runner_id]
        super().__setitem__(runner_id, runner)
        self._by_name[runner.name.lower()] = runner
        self.per_set[runner.scale_set_id] += 1
        self.busy[runner.scale_set_id] += runner.job_id is not None
        runner.busy = self.busy

    def __delitem__(self, runner_id: int) -> None:
        runner = self[runner_id]
        super().__delitem__(runner_id)
        self._by_name.pop(runner.name.lower(), None)
        self.per_set[runner.scale_set_id] -= 1
        self.busy[runner.scale_set_id] -= runner.job_id is not None
        runner.busy = None
        self._on_removed(runner_id)

    def pop(self, runner_id: int, default: Any = None) -> Any:
        if runner_id not in self:
            return default
        runner = self[runner_id]
        del self[runner_id]
        return runner

    def named(self, name: str) -> Runner | None:
        return self._by_name.get(name.lower())


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
        self.job_tally: Counter[tuple[int | None, str]] = Counter()
        """Jobs by (scale set, state); add jobs with `add_job`."""
        self.runners = RunnerTable(on_removed=lambda runner_id: self.touch(("runner", runner_id)))
        self.requests: list[RequestRecord] = []
        self.runner_version_deprecated = False
        # In the order they started waiting, which is the order they are woken in.
        self._waiters: dict[_Waiter, None] = {}
        self._keyed: dict[Hashable, dict[_Waiter, None]] = {}
        self._touched: dict[Hashable, None] = {}
        self.checks = 0
        """Waiter conditions evaluated by `notify` so far: what a mutation costs, counted."""
        # Per scale set, as heaps by id (oldest first), with entries checked when taken: the
        # assigned jobs waiting for a runner and the online runners without a job (`Jobs.dispatch`).
        self.waiting_jobs: dict[int, list[tuple[int, Job]]] = {}
        self.idle_runners: dict[int, list[tuple[int, Runner]]] = {}
        self.next_scale_set_id = 1
        self.next_runner_group_id = 2
        self.next_message_id = 1
        self.next_job_id = 1001
        self.next_runner_id = 1
        self.next_workflow_run_id = 9001

    # -- change notification -------------------------------------------------------------

    def touch(self, key: Hashable) -> None:
        """A mutation changed what waiters keyed `key` read; the next `notify` checks them."""
        self._touched[key] = None

    def notify(self) -> None:
        """A mutation happened: wake the waiters whose condition holds now (a condition that
        raises wakes its waiter with the exception, as it would have raised in its task): every
        waiter without a key, and those whose key was touched since the last notify."""
        waiters = list(self._waiters)
        touched, self._touched = self._touched, {}
        for key in touched:
            waiters.extend(self._keyed.get(key, ()))
        for waiter in waiters:
            if waiter.woken.done():
                continue
            self.checks += 1
            try:
                holds = waiter.condition()
            except Exception as exc:
                waiter.woken.set_exception(exc)
                continue
            if holds:
                waiter.woken.set_result(None)

    async def _woken(self, condition: Callable[[], bool], key: Hashable | None) -> None:
        """Until a mutation finds `condition()` true."""
        waiter = _Waiter(condition, asyncio.get_running_loop().create_future())
        table = self._waiters if key is None else self._keyed.setdefault(key, {})
        table[waiter] = None
        try:
            await waiter.woken
        finally:
            del table[waiter]
            if key is not None and not table:
                del self._keyed[key]

    async def wait_for(
        self, predicate: Callable[[], bool], *, within: float | None, key: Hashable | None = None
    ) -> None:
        """Return once `predicate()` holds; TimeoutError after `within` seconds (None: never).
        With `key`, `predicate` must read only what mutations `touch(key)` for."""
        async with asyncio.timeout(within):
            # Checked again once woken: a later mutation in the same loop turn may undo it.
            while not predicate():
                await self._woken(predicate, key)

    def job_waits(self, job: Job) -> None:
        """`job` is assigned to its scale set and waits for a runner (`Jobs.dispatch`)."""
        if job.scale_set_id is not None:
            heapq.heappush(self.waiting_jobs.setdefault(job.scale_set_id, []), (job.id, job))

    def runner_idles(self, runner: Runner) -> None:
        """`runner` is online without a job (`Jobs.dispatch`)."""
        heapq.heappush(self.idle_runners.setdefault(runner.scale_set_id, []), (runner.id, runner))

    async def wait_changed(self, *, within: float) -> None:
        """Wait for the next mutation, or `within` seconds, whichever comes first."""
        try:
            async with asyncio.timeout(within):
                await self._woken(_always, None)
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

    def add_job(self, job: Job) -> None:
        self.jobs[job.id] = job
        self.job_tally[(job.scale_set_id, job.state)] += 1
        job.tally = self.job_tally

    def statistics(self, scale_set_id: int) -> dict[str, int]:
        """From the tallies the records keep (`Job.tally`, `RunnerTable`): a few lookups per
        message, where walking every job and runner of the set made each message O(N)."""
        jobs = self.job_tally
        registered = self.runners.per_set[scale_set_id]
        busy = self.runners.busy[scale_set_id]
        assigned, started = jobs[(scale_set_id, "assigned")], jobs[(scale_set_id, "started")]
        return {
            "totalAvailableJobs": jobs[(scale_set_id, "available")],
            "totalAcquiredJobs": jobs[(scale_set_id, "acquired")],
            "totalAssignedJobs": assigned + started,
            "totalRunningJobs": started,
            "totalRegisteredRunners": registered,
            "totalBusyRunners": busy,
            "totalIdleRunners": registered - busy,
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
