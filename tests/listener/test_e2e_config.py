"""`gha-listener` as a process with the configs ARC's controller writes, secrets read from files,
and logs that never carry a secret or an object body, against the emulators over loopback."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from tests.listener.conftest import (
    DEADLINE,
    RUNNER_SET,
    Cluster,
    GitHub,
    Process,
    eventually,
    listener_config,
    messages,
    wait_ready,
)

ARC_FIXTURES = Path(__file__).parent / "fixtures" / "arc"
PROJECT_LOGGERS = ("listener", "controller", "shared")
NOT_PEM = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"


def arc_config(name: str, cluster: Cluster, github: GitHub, **changes: Any) -> dict[str, Any]:
    """The fixture as ARC's controller would write it for this cluster and this GitHub: same
    keys in the same order, the values pointing at the emulators, ports picked by the kernel."""
    config: dict[str, Any] = json.loads((ARC_FIXTURES / name).read_text())
    config.update(
        configure_url=github.emulator.config_url(),
        ephemeral_runner_set_namespace=cluster.namespace,
        ephemeral_runner_set_name=RUNNER_SET,
        runner_scale_set_id=github.scale_set_id,
    )
    if config.get("github_token"):
        config["github_token"] = github.token
    if config["metrics_addr"]:
        config["metrics_addr"] = config["metrics_addr"].replace(":8080", ":0")
    config.update(changes)
    return config


async def get_status(url: str) -> int:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http,
        http.get(url) as response,
    ):
        return response.status


async def scales_to(cluster: Cluster, replicas: int) -> None:
    async def scaled() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == replicas

    await eventually(scaled, what=f"replicas={replicas}")


async def stops_cleanly(process: Process) -> None:
    process.proc.send_signal(signal.SIGTERM)
    assert await process.wait() == 0


async def test_arcs_pat_config_with_metrics_on_runs(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    process: Process = await spawn(arc_config("pat-metrics-on.json", cluster, github))
    await wait_ready(process)
    github.enqueue(1)
    await scales_to(cluster, 1)
    await stops_cleanly(process)


async def test_arcs_ipv6_metrics_address_binds(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    """Before: `metrics_addr: "[::]:8080"` was refused with exit 2."""
    process: Process = await spawn(arc_config("pat-metrics-ipv6.json", cluster, github))
    port = await asyncio.wait_for(asyncio.shield(process.port), DEADLINE)

    async def ready_over_ipv6() -> bool:
        return await get_status(f"http://[::1]:{port}/readyz") == 200

    await eventually(ready_over_ipv6, what="/readyz 200 on [::1]")
    github.enqueue(2)
    await scales_to(cluster, 2)
    await stops_cleanly(process)


async def test_arcs_app_config_with_metrics_off_runs_without_a_server(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    """Before: ARC's "metrics off" (`metrics_addr` and `metrics_endpoint` both "") was refused
    with exit 2. Now it runs, scales, and opens no port."""
    app = github.emulator.add_app()
    config = arc_config(
        "app-metrics-off.json",
        cluster,
        github,
        github_app_id=app.app_id,
        github_app_installation_id=app.installation_id,
        github_app_private_key=app.private_key_pem,
    )
    process: Process = await spawn(config, LISTENER_GITHUB_TOKEN="")
    github.enqueue(2)
    await scales_to(cluster, config["min_runners"] + 2)
    await stops_cleanly(process)
    assert not process.port.done()
    assert not any("serving /healthz" in line for line in process.lines)


async def test_arcs_config_with_a_root_ca_runs(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    process: Process = await spawn(arc_config("pat-server-root-ca.json", cluster, github))
    await wait_ready(process)
    await stops_cleanly(process)


@pytest.mark.parametrize(
    ("fixture", "changes", "message"),
    [
        (
            "pat-server-root-ca.json",
            {"server_root_ca": NOT_PEM},
            "gha-listener: invalid configuration: server_root_ca: the server root CA is not a "
            "valid PEM certificate bundle (SSLError)",
        ),
        (
            "azure-key-vault.json",
            {},
            'gha-listener: invalid configuration: vault_type "azure_key_vault" is not supported '
            "by gha-listener: give the GitHub credentials in the config file or in a file named "
            "by LISTENER_GITHUB_TOKEN_FILE (or LISTENER_GITHUB_APP_PRIVATE_KEY_FILE)",
        ),
    ],
    ids=["non-pem-root-ca", "azure-key-vault"],
)
async def test_an_arc_config_gha_listener_cannot_use_exits_2_with_one_line(
    cluster: Cluster,
    github: GitHub,
    spawn: Any,
    fixture: str,
    changes: dict[str, Any],
    message: str,
) -> None:
    """Before: a root CA that is not PEM failed with a traceback and exit 1."""
    config = arc_config(fixture, cluster, github, **changes)
    process: Process = await spawn(config, LISTENER_GITHUB_TOKEN="")
    assert await process.wait() == 2
    assert process.lines == [message]


async def test_the_pat_can_come_from_a_file_and_stays_out_of_the_environment(
    cluster: Cluster, github: GitHub, spawn: Any, tmp_path: Path
) -> None:
    """`docker inspect` shows a container's environment: the token file keeps the PAT out."""
    token_file = tmp_path / "github-token"
    token_file.write_text(github.token + "\n")
    process: Process = await spawn(
        listener_config(cluster, github),
        LISTENER_GITHUB_TOKEN="",
        LISTENER_GITHUB_TOKEN_FILE=str(token_file),
    )
    await wait_ready(process)
    assert github.token.encode() not in environment_of(process)
    github.enqueue(1)
    await scales_to(cluster, 1)
    await stops_cleanly(process)


async def test_the_app_key_can_come_from_a_file(
    cluster: Cluster, github: GitHub, spawn: Any, tmp_path: Path
) -> None:
    app = github.emulator.add_app()
    key_file = tmp_path / "app-key.pem"
    key_file.write_text(app.private_key_pem)
    config = listener_config(
        cluster, github, github_app_id=app.app_id, github_app_installation_id=app.installation_id
    )
    process: Process = await spawn(
        config, LISTENER_GITHUB_TOKEN="", LISTENER_GITHUB_APP_PRIVATE_KEY_FILE=str(key_file)
    )
    await wait_ready(process)
    await stops_cleanly(process)


async def test_an_unreadable_token_file_exits_2_with_one_line(
    cluster: Cluster, github: GitHub, spawn: Any, tmp_path: Path
) -> None:
    process: Process = await spawn(
        listener_config(cluster, github),
        LISTENER_GITHUB_TOKEN="",
        LISTENER_GITHUB_TOKEN_FILE=str(tmp_path),
    )
    assert await process.wait() == 2
    assert process.lines == [
        f"gha-listener: invalid configuration: cannot read LISTENER_GITHUB_TOKEN_FILE "
        f"{tmp_path}: Is a directory"
    ]


def environment_of(process: Process) -> bytes:
    """What `docker inspect` would show of the container: the process's environment."""
    return Path(f"/proc/{process.proc.pid}/environ").read_bytes()


def level_and_logger(line: str, log_format: str) -> tuple[str, str]:
    if log_format == "json":
        record = json.loads(line)
        return str(record["level"]).lower(), str(record["logger"])
    _date, _time, level, logger = line.split(" ", 4)[:4]
    return level.lower(), logger.rstrip(":")


@pytest.mark.parametrize("library_log_level", ["info", "debug"])
@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_a_debug_cycle_logs_no_secret_and_no_object_body(
    cluster: Cluster,
    github: GitHub,
    spawn: Any,
    tmp_path: Path,
    log_format: str,
    library_log_level: str,
) -> None:
    """At ARC's default `log_level: debug`, a whole cycle (session, scale, JobStarted read and
    promotion, session deleted) logs no credential and no field of the objects it read: a value
    planted in the runner template (copied into the runner the listener reads) never shows.
    Before: the libraries logged at DEBUG along with the listener."""
    planted = f"planted-template-value-{uuid.uuid4().hex}"
    await cluster.objects.patch(
        EPHEMERAL_RUNNER_SET,
        cluster.namespace,
        RUNNER_SET,
        {
            "spec": {
                "ephemeralRunnerSpec": {
                    "spec": {
                        "containers": [
                            {
                                "name": "runner",
                                "image": "ghcr.io/actions/actions-runner:latest",
                                "env": [{"name": "PLANTED", "value": planted}],
                            }
                        ]
                    }
                }
            }
        },
    )
    await cluster.create_runner("runner-a", phase="Pending")
    token_file = tmp_path / "github-token"
    token_file.write_text(github.token)
    process: Process = await spawn(
        listener_config(
            cluster,
            github,
            log_format=log_format,
            log_level="debug",
            library_log_level=library_log_level,
        ),
        LISTENER_GITHUB_TOKEN="",
        LISTENER_GITHUB_TOKEN_FILE=str(token_file),
    )
    await wait_ready(process)
    github.enqueue(duration=60.0)
    await github.start_runner("runner-a")

    async def promoted() -> bool:
        status: dict[str, Any] = (await cluster.runner("runner-a")).get("status", {})
        return status.get("phase") == "Running"

    await eventually(promoted, what="runner-a Running")
    await stops_cleanly(process)

    secrets = [
        github.token,
        cluster.listener_token,
        planted,
        *github.emulator.credentials.tokens,
    ]
    # The listener's own debug lines are there: the level took effect.
    assert any("published replicas=" in line for line in process.lines)
    for line in process.lines:
        for secret in secrets:
            assert secret not in line
        level, logger = level_and_logger(line, log_format)
        if library_log_level == "info" and level == "debug":
            assert logger.split(".")[0] in PROJECT_LOGGERS, line


async def test_metrics_auth_without_the_review_binding_exits_2_with_one_line(
    cluster: Cluster, github: GitHub, spawn: Any
) -> None:
    """The listener's ServiceAccount here has its Role only, not the binding of
    manifests/metrics-auth/: every scrape would fail, so it says what to bind at start."""
    process: Process = await spawn(listener_config(cluster, github, metrics_auth=True))
    assert await process.wait() == 2
    assert messages(process)[-1] == (
        "cannot start: metrics auth is on, but this identity may not create "
        "tokenreviews.authentication.k8s.io or create subjectaccessreviews.authorization.k8s.io: "
        "bind the ClusterRole gha-controller-metrics-auth to it (manifests/metrics-auth/)"
    )
