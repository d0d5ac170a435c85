"""Runner groups and runner scale sets: names unique, deletion takes the scale set's sessions
and runners with it and sends its unfinished jobs back to the queue."""

from __future__ import annotations

import time
from typing import Any

from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.jobs import Jobs
from sandbox.actions.state.records import (
    EX_ARGUMENT,
    EX_RUNNER_GROUP_NOT_FOUND,
    EX_SCALE_SET_EXISTS,
    MessageQueue,
    RunnerGroup,
    ScaleSet,
    ServiceError,
)
from sandbox.actions.state.sessions import Sessions


class ScaleSets:
    def __init__(self, data: ServiceData, jobs: Jobs, sessions: Sessions) -> None:
        self.data = data
        self.jobs = jobs
        self.sessions = sessions

    def add_runner_group(self, name: str) -> int:
        group = RunnerGroup(self.data.next_runner_group_id, name)
        self.data.next_runner_group_id += 1
        self.data.runner_groups[group.id] = group
        self.data.notify()
        return group.id

    def runner_groups_named(self, name: str) -> list[RunnerGroup]:
        return [g for g in self.data.runner_groups.values() if g.name.lower() == name.lower()]

    def find_scale_sets(self, *, name: str, runner_group_id: int | None) -> list[ScaleSet]:
        return [
            s
            for s in self.data.scale_sets.values()
            if s.name.lower() == name.lower()
            and (runner_group_id is None or s.runner_group_id == runner_group_id)
        ]

    def _check_group(self, group_id: int) -> None:
        if group_id not in self.data.runner_groups:
            raise ServiceError(
                404, EX_RUNNER_GROUP_NOT_FOUND, f"The runner group {group_id} does not exist."
            )

    def _check_name_free(self, name: str, *, except_id: int = 0) -> None:
        if not name:
            raise ServiceError(400, EX_ARGUMENT, "The runner scale set name is required.")
        for other in self.data.scale_sets.values():
            if other.id != except_id and other.name.lower() == name.lower():
                raise ServiceError(
                    409, EX_SCALE_SET_EXISTS, f"A runner scale set named {name} already exists."
                )

    def create_scale_set(
        self,
        *,
        name: str,
        runner_group_id: int,
        labels: list[dict[str, str]],
        runner_setting: dict[str, Any],
    ) -> ScaleSet:
        self._check_name_free(name)
        self._check_group(runner_group_id)
        scale_set = ScaleSet(
            id=self.data.next_scale_set_id,
            name=name,
            runner_group_id=runner_group_id,
            labels=labels or [{"type": "System", "name": name}],
            runner_setting=runner_setting,
            created_on=time.time(),
        )
        self.data.next_scale_set_id += 1
        self.data.scale_sets[scale_set.id] = scale_set
        self.data.queues[scale_set.id] = MessageQueue()
        self.jobs.route_queued()
        self.data.notify()
        return scale_set

    def update_scale_set(
        self,
        scale_set_id: int,
        *,
        name: str,
        runner_group_id: int,
        labels: list[dict[str, str]],
        runner_setting: dict[str, Any] | None,
    ) -> ScaleSet:
        """Zero and empty fields mean "unchanged", as the Go client omits them."""
        scale_set = self.data.scale_set(scale_set_id)
        if name:
            self._check_name_free(name, except_id=scale_set_id)
        if runner_group_id:
            self._check_group(runner_group_id)
            scale_set.runner_group_id = runner_group_id
        if name:
            scale_set.name = name
        if labels:
            scale_set.labels = labels
        if runner_setting:
            scale_set.runner_setting = runner_setting
        self.jobs.route_queued()
        self.data.notify()
        return scale_set

    def delete_scale_set(self, scale_set_id: int) -> None:
        self.data.scale_set(scale_set_id)
        for session in [s for s in self.data.sessions.values() if s.scale_set_id == scale_set_id]:
            self.sessions.drop(session)
        for runner in [r for r in self.data.runners.values() if r.scale_set_id == scale_set_id]:
            job = self.data.jobs.get(runner.job_id) if runner.job_id is not None else None
            if job is not None and job.state == "started":
                self.jobs.complete(job, result="canceled")
            self.data.runners.pop(runner.id, None)
        del self.data.scale_sets[scale_set_id]
        del self.data.queues[scale_set_id]
        for job in self.data.jobs.values():
            if job.scale_set_id == scale_set_id and job.state != "completed":
                job.state, job.scale_set_id, job.scale_set_assign_time = "queued", None, None
                job.runner_id, job.runner_name = None, ""
                job.offer_outstanding = False
        self.jobs.route_queued()
        self.data.notify()
