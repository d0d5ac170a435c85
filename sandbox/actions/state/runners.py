"""Runners: registered by JIT config, online when their process connects, deregistered after
their one job or when removed."""

from __future__ import annotations

import secrets
import time
from typing import Any

from sandbox.actions.state.data import ServiceData
from sandbox.actions.state.jobs import Jobs
from sandbox.actions.state.records import (
    EX_AGENT_EXISTS,
    EX_ARGUMENT,
    EX_JOB_STILL_RUNNING,
    Runner,
    ServiceError,
)


class Runners:
    def __init__(self, data: ServiceData, jobs: Jobs) -> None:
        self.data = data
        self.jobs = jobs

    def generate_jit_config(
        self, scale_set_id: int, *, name: str, work_folder: str
    ) -> tuple[Runner, dict[str, Any]]:
        scale_set = self.data.scale_set(scale_set_id)
        if not name:
            raise ServiceError(400, EX_ARGUMENT, "The runner name is required.")
        if self.data.runners.named(name) is not None:
            raise ServiceError(409, EX_AGENT_EXISTS, f"A runner named {name} already exists.")
        runner = Runner(
            id=self.data.next_runner_id,
            name=name,
            scale_set_id=scale_set_id,
            work_folder=work_folder or "_work",
            token=secrets.token_urlsafe(30),
        )
        self.data.next_runner_id += 1
        self.data.runners[runner.id] = runner
        settings = {
            "AgentId": runner.id,
            "AgentName": runner.name,
            "PoolId": 0,
            "PoolName": scale_set.name,
            "RunnerScaleSetId": scale_set.id,
            "ServerUrl": self.data.service_url,
            "WorkFolder": runner.work_folder,
            "Ephemeral": True,
            "DisableUpdate": bool(scale_set.runner_setting.get("disableUpdate", False)),
        }
        credentials = {"Scheme": "OAuthAccessToken", "Data": {"token": runner.token}}
        self.data.notify()
        return runner, {".runner": settings, ".credentials": credentials}

    def runners_named(self, name: str) -> list[Runner]:
        runner = self.data.runners.named(name)
        return [] if runner is None else [runner]

    def remove_runner(self, runner_id: int) -> None:
        runner = self.data.runner(runner_id)
        if runner.job_id is not None:
            raise ServiceError(
                400,
                EX_JOB_STILL_RUNNING,
                f"The runner {runner.name} cannot be removed while job {runner.job_id} runs.",
            )
        del self.data.runners[runner_id]
        self.data.notify()

    def runner_online(self, runner_id: int, token: str) -> Runner | None:
        """A simulated runner connects with its JIT credentials; None when it is unknown."""
        runner = self.data.runners.get(runner_id)
        if runner is None or not secrets.compare_digest(runner.token, token):
            return None
        runner.online = True
        if runner.online_time is None:
            runner.online_time = time.time()
        if runner.job_id is None:
            self.data.runner_idles(runner)
        self.jobs.dispatch()
        self.data.notify()
        return runner

    def runner_offline(self, runner_id: int) -> None:
        """The runner process went away: a started job is canceled, a bound one re-dispatched."""
        runner = self.data.runners.get(runner_id)
        if runner is None:
            return
        runner.online = False
        job = self.data.jobs.get(runner.job_id) if runner.job_id is not None else None
        if job is not None and job.state == "started":
            self.jobs.complete(job, result="canceled")
        elif job is not None:
            job.runner_id, job.runner_name = None, ""
            runner.job_id = None
            self.data.touch(("runner", runner.id))
            self.data.job_waits(job)
            self.jobs.dispatch()
        self.data.notify()
