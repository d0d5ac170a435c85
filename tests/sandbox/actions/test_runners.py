"""JIT configs and the runner registry: get by id, by name, remove
(docs/sandbox-actions.md#service-behaviour)."""

from __future__ import annotations

import base64
import json

import pytest

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import AGENTS, SCALE_SETS, Service


async def test_jit_config_registers_a_runner(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")

    reply = await service.generate_jit(scale_set["id"], "arc-runner-abc")

    assert reply.status == 200
    runner = reply.json["runner"]
    assert runner["name"] == "arc-runner-abc"
    assert runner["runnerScaleSetId"] == scale_set["id"]
    files = json.loads(base64.b64decode(reply.json["encodedJITConfig"]))
    settings = json.loads(base64.b64decode(files[".runner"]))
    assert settings["AgentId"] == runner["id"]
    assert settings["ServerUrl"] == service.url
    assert set(files) == {".runner", ".credentials"}
    fetched = await service.call("GET", f"{AGENTS}/{runner['id']}")
    assert fetched.json == runner


@pytest.mark.parametrize(
    ("case", "status", "type_name"),
    [
        ("duplicate name", 409, "AgentExistsException"),
        ("unknown scale set", 404, "RunnerScaleSetNotFoundException"),
        ("empty name", 400, "ArgumentException"),
    ],
)
async def test_jit_config_errors(service: Service, case: str, status: int, type_name: str) -> None:
    scale_set = await service.create_scale_set("arc")
    await service.generate_jit(scale_set["id"], "taken")
    target, name = scale_set["id"], "taken"
    if case == "unknown scale set":
        target, name = 999, "fresh"
    elif case == "empty name":
        name = ""

    reply = await service.generate_jit(target, name)

    assert reply.status == status
    assert reply.json["typeName"].endswith(type_name)


@pytest.mark.parametrize(("name", "count"), [("r-1", 1), ("R-1", 1), ("nobody", 0)])
async def test_get_runner_by_name(service: Service, name: str, count: int) -> None:
    scale_set = await service.create_scale_set("arc")
    await service.generate_jit(scale_set["id"], "r-1")
    await service.generate_jit(scale_set["id"], "r-2")

    reply = await service.call("GET", AGENTS, params={"agentName": name})

    assert reply.status == 200
    assert reply.json["count"] == count
    assert [r["name"] for r in reply.json["value"]] == ["r-1"] * count


async def test_get_unknown_runner_answers_404(service: Service) -> None:
    reply = await service.call("GET", f"{AGENTS}/77")

    assert reply.status == 404
    assert reply.json["typeName"].endswith("AgentNotFoundException")


async def test_remove_runner_answers_204_then_404(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")
    runner = (await service.generate_jit(scale_set["id"], "r-1")).json["runner"]

    removed = await service.call("DELETE", f"{AGENTS}/{runner['id']}")
    again = await service.call("DELETE", f"{AGENTS}/{runner['id']}")

    assert (removed.status, removed.text) == (204, "")
    assert again.status == 404
    assert again.json["typeName"].endswith("AgentNotFoundException")


async def test_removing_a_busy_runner_answers_job_still_running(
    actions: ActionsEmulator, service: Service
) -> None:
    scale_set, session = await service.open_scale_set("arc")
    reply = await service.generate_jit(scale_set["id"], "r-1")
    runner_id = reply.json["runner"]["id"]
    request_id = actions.enqueue_job(labels=["arc"])
    await service.acquire(session, scale_set["id"], [request_id])
    actions.state.runner_online(runner_id, actions.state.runners[runner_id].token)

    busy = await service.call("DELETE", f"{AGENTS}/{runner_id}")

    assert busy.status == 400
    assert busy.json["typeName"].endswith("JobStillRunningException")
    assert runner_id in actions.state.runners


async def test_registered_runners_count_in_statistics(service: Service) -> None:
    scale_set = await service.create_scale_set("arc")
    await service.generate_jit(scale_set["id"], "r-1")
    await service.generate_jit(scale_set["id"], "r-2")

    reply = await service.call("GET", f"{SCALE_SETS}/{scale_set['id']}")

    statistics = reply.json["statistics"]
    assert statistics["totalRegisteredRunners"] == 2
    assert statistics["totalIdleRunners"] == 2
    assert statistics["totalBusyRunners"] == 0
