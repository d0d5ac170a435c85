"""`python -m sandbox.kube`: URL on the first line, a kubeconfig kubectl and the client accept,
clean exit on SIGTERM/SIGINT, and exit code 2 for a bad option."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from shared.kube.client import load_configuration
from tests.sandbox.kube.conftest import FIXTURES, TIMEOUT

KUBECTL = shutil.which("kubectl")


async def serve(tmp_path: Path, *extra: str) -> tuple[asyncio.subprocess.Process, str, Path]:
    kubeconfig = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.kube",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--crds",
        str(FIXTURES / "widgets-crd.yaml"),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(TIMEOUT * 3):
        url = (await proc.stdout.readline()).decode().strip()
    return proc, url, kubeconfig


@pytest.fixture(params=[False, True], ids=["http", "https"])
async def server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Path, bool]]:
    tls = bool(request.param)
    proc, url, kubeconfig = await serve(tmp_path, *(["--tls"] if tls else []))
    try:
        yield url, kubeconfig, tls
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.communicate()


async def test_prints_url_and_writes_a_working_kubeconfig(server: tuple[str, Path, bool]) -> None:
    url, kubeconfig, tls = server
    assert url.startswith("https://127.0.0.1:" if tls else "http://127.0.0.1:")
    config = yaml.safe_load(kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == url
    assert ("certificate-authority-data" in config["clusters"][0]["cluster"]) is tls
    cfg = await load_configuration(str(kubeconfig))
    async with client.ApiClient(cfg) as api:
        names = [n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items]
    assert "default" in names


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_reaches_the_standalone_server(
    server: tuple[str, Path, bool], tmp_path: Path
) -> None:
    _, kubeconfig, _ = server
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "cache"),
        "get",
        "widgets",
        "-A",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    async with asyncio.timeout(TIMEOUT * 3):
        _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert b"No resources found" in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_exits_cleanly_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    proc, _, _ = await serve(tmp_path)
    proc.send_signal(sig)
    async with asyncio.timeout(TIMEOUT):
        _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()


async def exit_of(*args: str) -> tuple[int | None, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.kube",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(TIMEOUT * 3):
        out, err = await proc.communicate()
    return proc.returncode, out, err.decode()


async def test_missing_crd_file_is_a_one_line_error_with_exit_2(tmp_path: Path) -> None:
    code, out, err = await exit_of(
        "--kubeconfig", str(tmp_path / "k"), "--crds", str(tmp_path / "absent.yaml")
    )
    assert code == 2
    assert out == b""
    assert len(err.strip().splitlines()) == 1
    assert "absent.yaml" in err


async def test_a_taken_port_is_a_one_line_error_with_exit_2(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        code, out, err = await exit_of(
            "--port",
            port,
            "--kubeconfig",
            str(tmp_path / "k"),
            "--crds",
            str(FIXTURES / "widgets-crd.yaml"),
        )
    assert code == 2
    assert out == b""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith(f"cannot listen on 127.0.0.1:{port}:")
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "no-processes"])
async def test_the_project_image_runs_as_a_process_unless_no_processes(
    tmp_path: Path, processes: bool
) -> None:
    """A project-image pod whose command does not exist: a process fails with 127, the
    simulated runtime (`--no-processes`) just runs it."""
    proc, _, kubeconfig = await serve(tmp_path, *([] if processes else ["--no-processes"]))
    try:
        cfg = await load_configuration(str(kubeconfig))
        async with client.ApiClient(cfg) as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_pod(
                "default",
                {
                    "metadata": {"name": "p"},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "c", "image": "gha-runner-scaler:0.1.0", "command": ["nope"]}
                        ],
                    },
                },
            )
            expected = "Failed" if processes else "Running"
            async with asyncio.timeout(TIMEOUT):
                while True:
                    pod = await core.read_namespaced_pod("p", "default")
                    if pod.status.phase == expected:
                        break
                    await asyncio.sleep(0.05)
        state = pod.status.container_statuses[0].state
        if processes:
            assert state.terminated.exit_code == 127
        else:
            assert state.running is not None
    finally:
        proc.terminate()
        await proc.communicate()


async def test_nodes_out_of_range_is_a_one_line_error_with_exit_2(tmp_path: Path) -> None:
    code, out, err = await exit_of("--kubeconfig", str(tmp_path / "k"), "--nodes", "0")
    assert (code, out) == (2, b"")
    assert err == "--nodes: give 1 to 200, not 0\n"


async def test_nodes_gives_that_many_worker_nodes(tmp_path: Path) -> None:
    proc, url, _ = await serve(tmp_path, "--nodes", "3", "--no-processes")
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/api/v1/nodes") as resp:
            names = {n["metadata"]["name"] for n in (await resp.json())["items"]}
        assert names == {
            "sandbox-control-plane",
            "sandbox-node",
            "sandbox-node-2",
            "sandbox-node-3",
        }
    finally:
        proc.terminate()
        await proc.communicate()
