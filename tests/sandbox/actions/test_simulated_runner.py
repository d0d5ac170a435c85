"""Simulated runners: a job from enqueue to completion, and the runtime's exit codes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import Service, job_messages

ZERO = "0001-01-01T00:00:00Z"


def runner_pod(jit_config: str | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    container = {"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"}
    pod = {
        "metadata": {"name": "arc-runner-abc", "namespace": "arc-runners"},
        "spec": {"initContainers": [{"name": "init-dind"}], "containers": [container]},
    }
    env = {} if jit_config is None else {"ACTIONS_RUNNER_INPUT_JITCONFIG": jit_config}
    return pod, container, env


async def run_pod(actions: ActionsEmulator, jit_config: str | None) -> int:
    pod, container, env = runner_pod(jit_config)
    return await actions.runtime.run(pod=pod, container=container, env=env)


class Listener:
    """The listener's loop reduced to the wire: poll, record, ack, acquire what is available."""

    def __init__(self, service: Service, session: dict[str, Any], scale_set_id: int) -> None:
        self.service, self.session, self.scale_set_id = service, session, scale_set_id
        self.last_message_id = 0
        self.messages: list[dict[str, Any]] = []

    def job_messages(self) -> list[tuple[str, dict[str, Any], dict[str, int]]]:
        return [
            (j["messageType"], j, m["statistics"]) for m in self.messages for j in job_messages(m)
        ]

    async def until(self, message_type: str, count: int = 1) -> None:
        async with asyncio.timeout(10):
            while sum(1 for t, _, _ in self.job_messages() if t == message_type) < count:
                reply = await self.service.get_message(
                    self.session, last_message_id=self.last_message_id
                )
                if reply.status == 202:
                    continue
                message = reply.json
                self.messages.append(message)
                self.last_message_id = message["messageId"]
                await self.service.delete_message(self.session, message["messageId"])
                available = [
                    j["runnerRequestId"]
                    for j in job_messages(message)
                    if j["messageType"] == "JobAvailable"
                ]
                if available:
                    await self.service.acquire(self.session, self.scale_set_id, available)


async def start_listener(service: Service, name: str = "arc") -> tuple[Listener, int]:
    scale_set = await service.create_scale_set(name)
    session = await service.open_session(scale_set["id"])
    return Listener(service, session, scale_set["id"]), scale_set["id"]


@pytest.mark.parametrize("result", ["succeeded", "failed"])
async def test_job_runs_from_enqueue_to_completion(
    actions: ActionsEmulator, service: Service, result: str
) -> None:
    listener, scale_set_id = await start_listener(service)
    request_id = actions.enqueue_job(labels=["arc"], duration=3600, result=result)
    await listener.until("JobAssigned")
    jit = (await service.generate_jit(scale_set_id, "arc-runner-abc")).json
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    await listener.until("JobStarted")

    actions.complete_job(request_id)
    await listener.until("JobCompleted")

    assert await pod == 0
    sequence = [(t, j["runnerRequestId"]) for t, j, _ in listener.job_messages()]
    assert sequence == [
        ("JobAvailable", request_id),
        ("JobAssigned", request_id),
        ("JobStarted", request_id),
        ("JobCompleted", request_id),
    ]
    by_type = {t: (j, s) for t, j, s in listener.job_messages()}
    started, started_stats = by_type["JobStarted"]
    completed, completed_stats = by_type["JobCompleted"]
    runner = jit["runner"]
    assert (started["runnerId"], started["runnerName"]) == (runner["id"], "arc-runner-abc")
    assert (completed["runnerId"], completed["runnerName"]) == (runner["id"], "arc-runner-abc")
    assert started["scaleSetAssignTime"] != ZERO
    assert started["runnerAssignTime"] != ZERO
    assert completed["finishTime"] >= completed["runnerAssignTime"]
    assert completed["result"] == result
    assert by_type["JobAvailable"][1]["totalAvailableJobs"] == 1
    assert by_type["JobAssigned"][1]["totalAssignedJobs"] == 1
    assert started_stats == {
        "totalAvailableJobs": 0,
        "totalAcquiredJobs": 0,
        "totalAssignedJobs": 1,
        "totalRunningJobs": 1,
        "totalRegisteredRunners": 1,
        "totalBusyRunners": 1,
        "totalIdleRunners": 0,
    }
    assert completed_stats == dict.fromkeys(completed_stats, 0)
    assert runner["id"] not in actions.state.runners


async def test_runner_waits_for_a_job_before_starting_it(
    actions: ActionsEmulator, service: Service
) -> None:
    listener, scale_set_id = await start_listener(service)
    jit = (await service.generate_jit(scale_set_id, "early")).json
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    runner_id = jit["runner"]["id"]
    await actions.state.wait_for(lambda: actions.state.runners[runner_id].online, within=5)

    request_id = actions.enqueue_job(labels=["arc"])
    await listener.until("JobCompleted")

    assert await pod == 0
    assert actions.state.jobs[request_id].runner_name == "early"


async def test_jobs_go_to_runners_of_their_own_scale_set(
    actions: ActionsEmulator, service: Service
) -> None:
    listener, scale_set_id = await start_listener(service)
    other = await service.create_scale_set("other")
    foreign = (await service.generate_jit(other["id"], "foreign")).json
    mine = (await service.generate_jit(scale_set_id, "mine")).json
    foreign_pod = asyncio.create_task(run_pod(actions, foreign["encodedJITConfig"]))
    await actions.state.wait_for(
        lambda: actions.state.runners[foreign["runner"]["id"]].online, within=5
    )
    request_id = actions.enqueue_job(labels=["arc"])
    await listener.until("JobAssigned")

    assert await run_pod(actions, mine["encodedJITConfig"]) == 0
    assert actions.state.jobs[request_id].runner_name == "mine"
    assert not foreign_pod.done()
    foreign_pod.cancel()
    with pytest.raises(asyncio.CancelledError):
        await foreign_pod


async def test_deleting_the_pod_mid_job_completes_it_as_canceled(
    actions: ActionsEmulator, service: Service
) -> None:
    listener, scale_set_id = await start_listener(service)
    request_id = actions.enqueue_job(labels=["arc"], duration=3600)
    await listener.until("JobAssigned")
    jit = (await service.generate_jit(scale_set_id, "doomed")).json
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    await listener.until("JobStarted")

    pod.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pod
    await listener.until("JobCompleted")

    assert actions.state.jobs[request_id].final_result == "canceled"


@pytest.mark.parametrize(
    ("case", "exit_code"),
    [
        ("deprecated version", 7),
        ("no JIT config", 1),
        ("garbage JIT config", 1),
        ("unregistered runner", 1),
        ("crash", 3),
    ],
)
async def test_runner_exit_codes(
    actions: ActionsEmulator, service: Service, case: str, exit_code: int
) -> None:
    scale_set = await service.create_scale_set("arc")
    jit = (await service.generate_jit(scale_set["id"], "r")).json
    config: str | None = jit["encodedJITConfig"]
    if case == "deprecated version":
        actions.deprecate_runner_version(True)
    elif case == "no JIT config":
        config = None
    elif case == "garbage JIT config":
        config = "bm90IGpzb24="
    elif case == "unregistered runner":
        actions.state.remove_runner(jit["runner"]["id"])
    elif case == "crash":
        actions.faults.crash_runners(3)

    assert await run_pod(actions, config) == exit_code


async def test_removing_an_idle_runner_stops_it(actions: ActionsEmulator, service: Service) -> None:
    scale_set = await service.create_scale_set("arc")
    jit = (await service.generate_jit(scale_set["id"], "idle")).json
    runner_id = jit["runner"]["id"]
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    await actions.state.wait_for(lambda: actions.state.runners[runner_id].online, within=5)

    await service.call("DELETE", f"_apis/distributedtask/pools/0/agents/{runner_id}")

    assert await pod == 1


@pytest.mark.parametrize("container", ["init-dind", "dind"])
async def test_other_containers(actions: ActionsEmulator, container: str) -> None:
    pod = {
        "spec": {
            "initContainers": [{"name": "init-dind"}],
            "containers": [{"name": "runner"}, {"name": "dind"}],
        }
    }

    task = asyncio.create_task(actions.runtime.run(pod=pod, container={"name": container}, env={}))

    if container == "init-dind":
        assert await task == 0
    else:
        await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_deleting_the_scale_set_cancels_its_running_job(
    actions: ActionsEmulator, service: Service
) -> None:
    listener, scale_set_id = await start_listener(service)
    request_id = actions.enqueue_job(labels=["arc"], duration=3600)
    await listener.until("JobAssigned")
    jit = (await service.generate_jit(scale_set_id, "r")).json
    pod = asyncio.create_task(run_pod(actions, jit["encodedJITConfig"]))
    await listener.until("JobStarted")

    deleted = await service.call("DELETE", f"_apis/runtime/runnerscalesets/{scale_set_id}")

    assert deleted.status == 204
    assert await pod == 0
    assert actions.state.jobs[request_id].final_result == "canceled"
    assert actions.state.runners == {}
