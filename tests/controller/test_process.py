"""`gha-controller`, started as a process against the emulators, runs both runner reconcilers
and serves ARC's controller gauges."""

from __future__ import annotations

import asyncio
import base64
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp
from kubernetes_asyncio import client

from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import Objects

CONTROLLER = Path(sys.executable).with_name("gha-controller")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_gha_controller_registers_a_runner_and_publishes_gauges(
    tmp_path: Path, namespace: str, actions: ActionsEmulator
) -> None:
    async with KubeEmulator() as kube:
        kube.apply_crds(project_crds())
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "github-secret", "namespace": namespace},
                "data": {"github_token": base64.b64encode(actions.add_pat().encode()).decode()},
            }
        )
        scale_set = actions.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig)
        port = free_port()
        process = await asyncio.create_subprocess_exec(
            str(CONTROLLER),
            "--kubeconfig",
            str(kubeconfig),
            "--no-leader-elect",
            "--watch-namespace",
            namespace,
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            "--health-port",
            str(port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        api = client.ApiClient(await kube.configuration())
        try:
            objects = Objects(api)
            await objects.create(
                EPHEMERAL_RUNNER_SET,
                namespace,
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunnerSet",
                    "metadata": {
                        "name": "arc",
                        "labels": {"actions.github.com/scale-set-name": "arc"},
                    },
                    "spec": {
                        "replicas": 1,
                        "patchID": 1,
                        "ephemeralRunnerSpec": {
                            "githubConfigUrl": actions.config_url("owner", "repo"),
                            "githubConfigSecret": "github-secret",
                            "runnerScaleSetId": scale_set.id,
                            "spec": {"containers": [{"name": "runner", "image": "runner"}]},
                        },
                    },
                },
            )
            deadline = time.monotonic() + 30
            registered = False
            while not registered and time.monotonic() < deadline:
                items = (await objects.list(EPHEMERAL_RUNNER, namespace))["items"]
                registered = bool(items) and bool(items[0].get("status", {}).get("runnerId"))
                await asyncio.sleep(0.1)
            assert registered
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/metrics") as response,
            ):
                text = await response.text()
            assert "gha_controller_pending_ephemeral_runners{" in text
            assert 'controller="ephemeralrunner"' in text
        finally:
            await api.close()
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, stderr.decode()[-2000:]
