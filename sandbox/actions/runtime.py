"""Simulated GitHub runners, run as containers by the Kubernetes emulator's kubelet.

`RunnerRuntime` satisfies the kubelet's ContainerRuntime protocol structurally: `run()` runs one
container until it exits and returns its exit code; the kubelet cancels it when the pod goes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sandbox.actions.faults import Faults
from sandbox.actions.server import decode_jit
from sandbox.actions.state.records import Runner
from sandbox.actions.state.service import ServiceState

log = logging.getLogger(__name__)

JIT_CONFIG_ENV = "ACTIONS_RUNNER_INPUT_JITCONFIG"
RUNNER_CONTAINER = "runner"
# The actions/runner exit code for "this runner version is deprecated"; ARC marks the
# EphemeralRunner Outdated on it.
EXIT_OUTDATED = 7
EXIT_RUNNER_FAILURE = 1


async def is_runner_container(pod: dict[str, Any], container: dict[str, Any]) -> bool:
    """True for the `runner` container; an init container is False at once (it exits 0), any
    other container idles here until cancelled."""
    name = container.get("name")
    init_names = {c.get("name") for c in pod.get("spec", {}).get("initContainers") or []}
    if name in init_names:
        return False
    if name != RUNNER_CONTAINER:
        await asyncio.Event().wait()
    return True


class RunnerRuntime:
    """Runs the `runner` container as a simulated runner; every other container idles until
    cancelled, and init containers exit 0 at once."""

    def __init__(self, *, state: ServiceState, faults: Faults) -> None:
        self._state = state
        self._faults = faults

    async def run(
        self, *, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]
    ) -> int:
        if not await is_runner_container(pod, container):
            return 0
        return await self.run_runner(env.get(JIT_CONFIG_ENV, ""))

    async def run_runner(self, jit_config: str) -> int:
        """One ephemeral runner: connect, take one job, run it, report it, exit."""
        state = self._state
        if state.runner_version_deprecated:
            log.info("runner version deprecated, exiting with %d", EXIT_OUTDATED)
            return EXIT_OUTDATED
        runner = self._connect(jit_config)
        if runner is None:
            return EXIT_RUNNER_FAILURE
        if self._faults.runner_crash_exit_code is not None:
            state.runner_offline(runner.id)
            return self._faults.runner_crash_exit_code
        try:
            return await self._take_one_job(runner)
        except asyncio.CancelledError:
            state.runner_offline(runner.id)
            raise

    def _connect(self, jit_config: str) -> Runner | None:
        try:
            files = decode_jit(jit_config)
            runner_id = int(files[".runner"]["AgentId"])
            token = str(files[".credentials"]["Data"]["token"])
        except (ValueError, KeyError, TypeError):
            log.warning("runner has no valid %s, exiting", JIT_CONFIG_ENV)
            return None
        runner = self._state.runner_online(runner_id, token)
        if runner is None:
            log.warning("runner %d is not registered with the service, exiting", runner_id)
        return runner

    async def _take_one_job(self, runner: Runner) -> int:
        state = self._state
        await state.wait_for(
            lambda: runner.job_id is not None or runner.id not in state.runners,
            within=None,
            key=("runner", runner.id),
        )
        if runner.job_id is None:
            log.info("runner %s was removed from the service, exiting", runner.name)
            return EXIT_RUNNER_FAILURE
        job = state.jobs[runner.job_id]
        if job.state == "completed":
            return 0
        state.start_job(job.id)
        try:
            await state.wait_for(
                lambda: job.state == "completed", within=job.duration, key=("job", job.id)
            )
        except TimeoutError:
            state.finish_job(job.id)
        return 0
