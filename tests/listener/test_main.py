"""`gha-listener`'s command line: `--version` from the package metadata, `--help` describing every
setting (from the settings' field descriptions), the one line a kubeconfig the process cannot
read gets, and which stream says what: the log on stdout (as ARC's listener), a configuration it
cannot start with on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from importlib import metadata
from pathlib import Path

from listener.config import ListenerSettings

GHA_LISTENER = Path(sys.executable).with_name("gha-listener")
# The image's user (Dockerfile), whom another user's 0600 file shuts out.
IMAGE_UID = 10001
# Root reads any file; without these capabilities it is shut out like any other uid.
NO_DAC_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def _run(
    *args: str, prefix: tuple[str, ...] = (), **environment: str
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "1000", **environment}
    return subprocess.run(
        [*prefix, str(GHA_LISTENER), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_is_the_package_version() -> None:
    """Before: gha-listener had no --version."""
    result = _run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gha-listener {metadata.version('gha-runner-scaler')}"


def test_help_describes_every_setting() -> None:
    """Before: --help named no setting, though every one is a LISTENER_<KEY> variable."""
    result = _run("--help")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for field in fields(ListenerSettings):
        description = field.metadata["description"]
        assert description, f"{field.name} has no description"
        (at,) = [i for i, line in enumerate(lines) if line.split(" ")[2:3] == [field.name]]
        assert lines[at + 1].strip() == description
    assert "LISTENER_GITHUB_TOKEN_FILE" in result.stdout


def test_an_unreadable_kubeconfig_names_the_file_and_the_uid(tmp_path: Path) -> None:
    """Before: the line said "set KUBECONFIG or run in a pod", though KUBECONFIG was set and the
    file was only unreadable by the process's uid (the image's 10001, a host user's 0600 file)."""
    kubeconfig = tmp_path / "listener.kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    if os.geteuid() == 0:
        os.chown(kubeconfig, IMAGE_UID, IMAGE_UID)
        kubeconfig.chmod(0o600)
    else:
        kubeconfig.chmod(0)
    result = _run(
        prefix=tuple(NO_DAC_OVERRIDE) if os.geteuid() == 0 else (),
        KUBECONFIG=str(kubeconfig),
        LISTENER_CONFIGURE_URL="https://github.com/octo-org",
        LISTENER_GITHUB_TOKEN="ghp_placeholder",
        LISTENER_EPHEMERAL_RUNNER_SET_NAMESPACE="arc-runners",
        LISTENER_EPHEMERAL_RUNNER_SET_NAME="my-runners",
        LISTENER_RUNNER_SCALE_SET_NAME="my-runners",
        LISTENER_METRICS_ADDR="127.0.0.1:0",
    )
    assert result.returncode == 2
    # Said in the log, and the listener logs to stdout as ARC's does (issue 41): nothing on
    # stderr, which some pipelines read as errors.
    [line] = [line for line in result.stdout.splitlines() if "kubeconfig" in line]
    assert result.stderr == ""
    assert f"cannot read the kubeconfig {kubeconfig} as uid {os.geteuid()}" in line
    assert "make it readable by this uid" in line
    assert "set KUBECONFIG" not in line


def test_a_configuration_it_cannot_start_with_is_said_on_stderr_not_in_the_log() -> None:
    """Before there is a log, as Go's log.Fatal says it in ARC's listener: stdout, the log,
    stays empty."""
    result = _run(LISTENER_CONFIGURE_URL="not a url", LISTENER_LOG_FORMAT="json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("gha-listener: invalid configuration: ")
