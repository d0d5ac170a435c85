"""`gha-controller`'s command line: `--version` from the package metadata and `--help` describing
every option with the docstring of its setting (controller/settings.py), its default and its
variable."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from controller.settings import ENV_PREFIX, ControllerSettings
from listener.config import ListenerSettings

GHA_CONTROLLER = Path(sys.executable).with_name("gha-controller")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # Wide enough that argparse wraps no help text.
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "1000"}
    return subprocess.run(
        [str(GHA_CONTROLLER), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_is_the_package_version() -> None:
    """Before: gha-controller had no --version (it was an unknown flag, exit 2)."""
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gha-controller {metadata.version('gha-runner-scaler')}"


def test_help_describes_every_option() -> None:
    """Before: --help listed the flags with no text at all."""
    result = _run("--help")
    assert result.returncode == 0
    described: dict[str, str] = {}
    flag = ""
    for line in result.stdout.split("options:", 1)[1].splitlines():
        words = line.split()
        if words and words[0].startswith("-"):
            flag = words[0].removesuffix(",")
            described[flag] = " ".join(words)
        elif words and flag:
            # A long option's help starts on the next line.
            described[flag] += " " + " ".join(words)
    described = {k: v for k, v in described.items() if k not in ("-h", "--version")}
    flags = {
        "--watch-namespace" if name == "watch_namespaces" else "--" + name.replace("_", "-"): name
        for name in ControllerSettings.model_fields
    }
    assert set(described) == set(flags)
    for flag, name in flags.items():
        field = ControllerSettings.model_fields[name]
        assert field.description, f"{name} has no docstring"
        assert " ".join(field.description.split()) in described[flag]
        assert f"Environment: {ENV_PREFIX}{name.upper()}." in described[flag]
    assert "Default: 8080." in described["--metrics-port"]


def test_defaults_leave_a_listeners_default_port_free() -> None:
    """Before: the controller's metrics and a listener's default metrics_addr were both 8080, so
    the two collided on one host network (docker run --network host)."""
    defaults = {key.name: key.default for key in dataclasses.fields(ListenerSettings)}
    listener_port = int(str(defaults["metrics_addr"]).rpartition(":")[2])
    fields = ControllerSettings.model_fields
    assert listener_port not in {fields["metrics_port"].default, fields["health_port"].default}
