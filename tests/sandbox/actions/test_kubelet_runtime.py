"""The simulated runner plugged into the Kubernetes emulator's kubelet: a runner pod's
container exits with the runner's exit code and the pod ends Succeeded or Failed. Each test runs
with the runtime in the kubelet's process and through `RemoteRuntime` (the kubelet in another
process, as in the scale benchmark)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from sandbox.actions import ActionsEmulator
from sandbox.actions.remote import RemoteRuntime
from sandbox.kube import ContainerRuntime, KubeEmulator
from tests.sandbox.actions.wire import authenticate


@pytest_asyncio.fixture
async def direct() -> AsyncIterator[ActionsEmulator]:
    async with ActionsEmulator(require_acquire=False, long_poll_timeout=0.2) as emulator:
        yield emulator


@pytest_asyncio.fixture(params=["in-process", "remote"])
async def core(
    direct: ActionsEmulator, request: pytest.FixtureRequest
) -> AsyncIterator[client.CoreV1Api]:
    remote = RemoteRuntime(direct.url) if request.param == "remote" else None
    runtime: ContainerRuntime = remote or direct.runtime
    if remote is not None:
        await remote.start()
    try:
        async with KubeEmulator(container_runtime=runtime) as kube:
            api = client.ApiClient(await kube.configuration())
            try:
                yield client.CoreV1Api(api)
            finally:
                await api.close()
    finally:
        if remote is not None:
            await remote.stop()


def runner_pod(name: str) -> dict[str, Any]:
    """The parts of an EphemeralRunner pod the runtime reads: the JIT config from the secret."""
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "runner",
                    "image": "ghcr.io/actions/actions-runner:latest",
                    "env": [
                        {
                            "name": "ACTIONS_RUNNER_INPUT_JITCONFIG",
                            "valueFrom": {"secretKeyRef": {"name": name, "key": "jitToken"}},
                        }
                    ],
                }
            ],
        },
    }


async def terminated(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    async with asyncio.timeout(20):
        while True:
            pod = await core.read_namespaced_pod(name, namespace)
            if pod.status.phase in ("Succeeded", "Failed"):
                return pod
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("deprecated", "phase", "exit_code", "job_state"),
    [(False, "Succeeded", 0, "completed"), (True, "Failed", 7, "assigned")],
)
async def test_runner_pod_exits_with_the_runner_exit_code(
    direct: ActionsEmulator,
    core: client.CoreV1Api,
    namespace: str,
    deprecated: bool,
    phase: str,
    exit_code: int,
    job_state: str,
) -> None:
    async with aiohttp.ClientSession() as http:
        service = await authenticate(direct, http)
        scale_set = await service.create_scale_set("arc")
        jit = (await service.generate_jit(scale_set["id"], "arc-runner-1")).json
    request_id = direct.enqueue_job(labels=["arc"])
    direct.deprecate_runner_version(deprecated)
    await core.create_namespace({"metadata": {"name": namespace}})
    await core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "arc-runner-1"}, "stringData": {"jitToken": jit["encodedJITConfig"]}},
    )

    await core.create_namespaced_pod(namespace, runner_pod("arc-runner-1"))
    pod = await terminated(core, namespace, "arc-runner-1")

    assert pod.status.phase == phase
    (status,) = pod.status.container_statuses
    assert status.state.terminated.exit_code == exit_code
    assert direct.state.jobs[request_id].state == job_state


async def test_deleting_the_pod_stops_its_runner(
    direct: ActionsEmulator, core: client.CoreV1Api, namespace: str
) -> None:
    async with aiohttp.ClientSession() as http:
        service = await authenticate(direct, http)
        scale_set = await service.create_scale_set("arc")
        jit = (await service.generate_jit(scale_set["id"], "arc-runner-1")).json
    await core.create_namespace({"metadata": {"name": namespace}})
    await core.create_namespaced_secret(
        namespace,
        {"metadata": {"name": "arc-runner-1"}, "stringData": {"jitToken": jit["encodedJITConfig"]}},
    )
    await core.create_namespaced_pod(namespace, runner_pod("arc-runner-1"))
    (runner,) = direct.state.runners.values()
    await direct.state.wait_for(lambda: runner.online, within=20)

    await core.delete_namespaced_pod("arc-runner-1", namespace)

    await direct.state.wait_for(lambda: not runner.online, within=20)
