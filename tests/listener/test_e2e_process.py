"""`gha-listener` as a process: SIGTERM deletes the session and exits 0, a restart resumes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.listener.conftest import (
    DEADLINE,
    RUNNER_SET,
    SCALE_SET,
    Cluster,
    GitHub,
    eventually,
)

GHA_LISTENER = str(Path(sys.executable).parent / "gha-listener")
PORT_LINE = re.compile(r"serving /healthz, /readyz and /metrics on port (\d+)")


@dataclass
class Process:
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    port: asyncio.Future[int] = field(default_factory=asyncio.Future)
    reader: asyncio.Task[None] | None = None

    async def read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode().rstrip("\n")
            self.lines.append(line)
            found = PORT_LINE.search(line)
            if found and not self.port.done():
                self.port.set_result(int(found.group(1)))

    async def wait(self) -> int:
        code = await asyncio.wait_for(self.proc.wait(), DEADLINE)
        if self.reader is not None:
            await self.reader
        return code


@pytest.fixture
async def spawn(cluster: Cluster, github: GitHub, tmp_path: Path) -> AsyncIterator[Any]:
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    processes: list[Process] = []

    async def start(config: dict[str, Any], **environment: str) -> Process:
        path = tmp_path / f"config-{len(processes)}.json"
        path.write_text(json.dumps(config))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LISTENER_CONFIG_PATH": str(path),
            "LISTENER_GITHUB_TOKEN": github.token,
            "KUBECONFIG": str(kubeconfig),
            **environment,
        }
        env = {name: value for name, value in env.items() if value}
        proc = await asyncio.create_subprocess_exec(
            GHA_LISTENER, env=env, stderr=asyncio.subprocess.PIPE
        )
        process = Process(proc=proc)
        process.reader = asyncio.create_task(process.read_stderr())
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.proc.returncode is None:
            process.proc.kill()
            await process.wait()


def listener_config(cluster: Cluster, github: GitHub, **changes: Any) -> dict[str, Any]:
    return {
        "configure_url": github.emulator.config_url(),
        "ephemeral_runner_set_namespace": cluster.namespace,
        "ephemeral_runner_set_name": RUNNER_SET,
        "runner_scale_set_name": SCALE_SET,
        "min_runners": 0,
        "max_runners": 10,
        "log_level": "debug",
        "log_format": "json",
        "metrics_addr": "127.0.0.1:0",
        "retry_initial_seconds": 0.05,
        "retry_max_seconds": 0.2,
        **changes,
    }


async def wait_ready(process: Process) -> None:
    port = await asyncio.wait_for(asyncio.shield(process.port), DEADLINE)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:

        async def ready() -> bool:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                return response.status == 200

        await eventually(ready, what="/readyz 200")


async def test_sigterm_deletes_the_session_and_a_restart_resumes(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    first: Process = await spawn(listener_config(cluster, github))
    await wait_ready(first)
    github.enqueue(2)

    async def scaled_to_two() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == 2

    await eventually(scaled_to_two, what="replicas=2 from the first listener")
    first.proc.send_signal(signal.SIGTERM)
    assert await first.wait() == 0
    state = github.emulator.state
    assert state.count("delete_session", status=204) == 1
    assert state.active_session(github.scale_set_id) is None

    second: Process = await spawn(listener_config(cluster, github))
    await wait_ready(second)
    github.enqueue(1)

    async def scaled_to_three() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == 3

    await eventually(scaled_to_three, what="replicas=3 after the restart")
    assert state.count("create_session", status=409) == 0
    second.proc.send_signal(signal.SIGTERM)
    assert await second.wait() == 0
    for line in first.lines + second.lines:
        assert json.loads(line)["level"]
        assert github.token not in line


@pytest.mark.parametrize(
    ("changes", "environment", "message"),
    [
        (
            {"min_runners": 5, "max_runners": 2},
            {},
            'gha-listener: invalid configuration: MinRunners "5" cannot be greater than '
            'MaxRunners "2"',
        ),
        (
            {"github_app_id": "1", "github_app_installation_id": 2},
            {"LISTENER_GITHUB_TOKEN": "", "LISTENER_GITHUB_APP_PRIVATE_KEY": "not a key"},
            "gha-listener: invalid configuration: the GitHub App private key is not a "
            "readable PEM key (ValueError)",
        ),
        (
            {"log_format": "text", "log_level": "info"},
            {"KUBECONFIG": ""},
            "cannot load the Kubernetes configuration",
        ),
    ],
    ids=["min-above-max", "unreadable-app-key", "no-kubernetes"],
)
async def test_unusable_configuration_exits_2_with_one_line(
    cluster: Cluster,
    github: GitHub,
    spawn: Any,
    changes: dict[str, Any],
    environment: dict[str, str],
    message: str,
) -> None:
    process: Process = await spawn(listener_config(cluster, github, **changes), **environment)
    assert await process.wait() == 2
    [line] = process.lines
    assert message in line
