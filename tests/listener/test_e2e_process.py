"""`gha-listener` as a process: SIGTERM deletes the session and exits 0, a restart resumes."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from tests.listener.conftest import (
    Cluster,
    GitHub,
    Process,
    eventually,
    listener_config,
    wait_ready,
)


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
        (
            {"configure_url": "https://github.com"},
            {},
            "gha-listener: invalid configuration: configure_url: invalid config URL",
        ),
        (
            {},
            {"LISTENER_GITHUB_TOKEN": ""},
            "gha-listener: invalid configuration: AppConfig validation failed: no credentials "
            "provided: either a PAT or GitHub App credentials should be provided",
        ),
    ],
    ids=[
        "min-above-max",
        "unreadable-app-key",
        "no-kubernetes",
        "bad-config-url",
        "no-credentials",
    ],
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
