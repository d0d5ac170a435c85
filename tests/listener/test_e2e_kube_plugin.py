"""A kubeconfig that only kubernetes-asyncio can read (an exec credential plugin, as EKS and GKE
kubeconfigs have) still works: the listener falls back to that library's loader and client."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import yaml

from tests.listener.conftest import Cluster, GitHub, StartListener, eventually


async def test_an_exec_plugin_kubeconfig_falls_back_to_the_client_library(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="listener")
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": cluster.listener_token},
    }
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"import json\nprint(json.dumps({json.dumps(credential)}))\n")
    config = cluster.kube.kubeconfig_dict(token=cluster.listener_token)
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
        }
    }
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(path))
    running = await start_listener()

    async def published() -> bool:
        patches = cluster.kube.requests.count(
            verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user, code=200
        )
        return patches > 0

    await eventually(published, what="the set patched through the exec plugin's token")
    assert any("using kubernetes-asyncio" in record.getMessage() for record in caplog.records)
    assert not running.task.done()
