"""`gha-listener --delete-scale-set`: the last step of taking a listener down for good
(README, "Run a listener with docker run", step 7). The process, against the Actions emulator
over loopback, with the settings a listener runs with; no Kubernetes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.listener.conftest import SCALE_SET, GitHub

GHA_LISTENER = str(Path(sys.executable).parent / "gha-listener")


async def delete_scale_set(github: GitHub, **environment: str) -> tuple[int, str]:
    """Run it as the README's `docker run --env-file listener.env` does: LISTENER_* variables
    only, the PAT in a file; its exit code and its log (stdout)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LISTENER_CONFIGURE_URL": github.emulator.config_url(),
        "LISTENER_GITHUB_TOKEN": github.token,
        "LISTENER_EPHEMERAL_RUNNER_SET_NAMESPACE": "arc-runners",
        "LISTENER_EPHEMERAL_RUNNER_SET_NAME": "my-runners",
        "LISTENER_RUNNER_SCALE_SET_NAME": SCALE_SET,
        **environment,
    }
    proc = await asyncio.create_subprocess_exec(
        GHA_LISTENER,
        "--delete-scale-set",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert err == b"", err
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_scale_set_found_by_name_is_deleted_and_a_second_run_finds_none(
    github: GitHub,
) -> None:
    assert github.scale_set_id in github.emulator.state.scale_sets
    code, out = await delete_scale_set(github)
    assert code == 0
    assert f"deleted scale set {github.scale_set_id} ({SCALE_SET})" in out
    assert github.scale_set_id not in github.emulator.state.scale_sets
    code, out = await delete_scale_set(github)
    assert code == 0
    assert f"no scale set named {SCALE_SET} in runner group Default: nothing to delete" in out


async def test_by_id_one_gone_already_is_no_error(github: GitHub) -> None:
    code, out = await delete_scale_set(github, LISTENER_RUNNER_SCALE_SET_ID="987654")
    assert code == 0
    assert "scale set 987654 is gone already: nothing to delete" in out
    assert github.scale_set_id in github.emulator.state.scale_sets


async def test_refused_credentials_exit_1_and_keep_the_scale_set(github: GitHub) -> None:
    code, out = await delete_scale_set(github, LISTENER_GITHUB_TOKEN="ghp_" + "x" * 36)
    assert code == 1
    assert f"cannot delete scale set {SCALE_SET}: " in out
    assert github.scale_set_id in github.emulator.state.scale_sets
