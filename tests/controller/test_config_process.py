"""A configuration `gha-controller` cannot work with stops the process at start with exit 2 and
one line saying what to fix, before it serves or watches anything: the process run as a user
runs it, with nothing listening at the kubeconfig's server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

GHA_CONTROLLER = str(Path(sys.executable).parent / "gha-controller")


def kubeconfig(path: Path, *, server: str, user: dict[str, str]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def run(tmp_path: Path, *args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GHA_CONTROLLER, *args],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **environment},
        capture_output=True,
        text=True,
        timeout=20,
    )


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing-kubeconfig", "gha-controller: kubeconfig {tmp}/nowhere is not a file"),
        (
            "no-credentials",
            "gha-controller: cannot load the Kubernetes configuration (ConfigException",
        ),
        (
            "unreadable-key",
            "gha-controller: cannot load the Kubernetes configuration (ConfigException: "
            "File does not exists: {tmp}/client.crt)",
        ),
        (
            "bad-server-url",
            "gha-controller: the Kubernetes API server 'not a url' in the kubeconfig is not an "
            "http(s) URL",
        ),
        ("bad-value", "gha-controller: metrics-port: Input should be a valid integer"),
        ("bad-flag", "gha-controller: unrecognized arguments: --max-runners=2"),
    ],
)
def test_an_unusable_configuration_exits_2_with_one_line(
    tmp_path: Path, case: str, message: str
) -> None:
    token = {"token": "a-token-that-is-never-sent"}
    args: list[str] = []
    environment: dict[str, str] = {}
    if case == "missing-kubeconfig":
        args = ["--kubeconfig", str(tmp_path / "nowhere")]
    elif case == "unreadable-key":
        user = {
            "client-certificate": str(tmp_path / "client.crt"),
            "client-key": str(tmp_path / "client.key"),
        }
        path = kubeconfig(tmp_path / "kubeconfig", server="https://127.0.0.1:1", user=user)
        args = ["--kubeconfig", str(path)]
    elif case == "bad-server-url":
        path = kubeconfig(tmp_path / "kubeconfig", server="not a url", user=token)
        args = ["--kubeconfig", str(path)]
    elif case in {"bad-value", "bad-flag"}:
        path = kubeconfig(tmp_path / "kubeconfig", server="https://127.0.0.1:1", user=token)
        environment = {"KUBECONFIG": str(path)}
        if case == "bad-value":
            environment["GHA_CONTROLLER_METRICS_PORT"] = "eighty"
        else:
            args = ["--max-runners=2"]
    result = run(tmp_path, *args, **environment)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(message.format(tmp=tmp_path)), line
    assert "a-token-that-is-never-sent" not in result.stderr
