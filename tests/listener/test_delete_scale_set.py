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


DOCKER_SHIM = '''#!/usr/bin/env python3
"""`docker run` for the README's teardown without a container: the command runs here, with the
environment --env-file and -e give it, and paths under a -v mount's container side pointing at
its host side."""
import os, sys
args = sys.argv[1:]
assert args.pop(0) == "run", args
env, mounts = {"PATH": os.environ["PATH"]}, {}
while args[0].startswith("-"):
    flag = args.pop(0)
    if flag in ("--rm",):
        continue
    value = args.pop(0)
    if flag == "--env-file":
        for line in open(value):
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, val = line.partition("=")
                env[key] = val
    elif flag == "-e":
        key, _, val = value.partition("=")
        env[key] = val
    elif flag == "-v":
        host, container = value.split(":")[:2]
        mounts[container] = host
image, command = args[0], args[1:]
for key, val in env.items():
    for container, host in mounts.items():
        if val == container or val.startswith(container + "/"):
            env[key] = host + val[len(container):]
os.execvpe(command[0], command, env)
'''


def readme_teardown() -> str:
    """The `docker run` of the README's docker-run teardown (its step 7), as written."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Run a listener with `docker run`", 1)[1].split("\n## ", 1)[0]
    step = section.split("# 7. ", 1)[1].split("```", 1)[0]
    return step[step.index("docker run --rm") :]


async def test_the_readmes_teardown_deletes_the_scale_set(github: GitHub, tmp_path: Path) -> None:
    """The command as the README writes it, in a listener's directory (listener.env from the
    overlay, the PAT in github-token), with `docker` running the command here."""
    overlay = Path(__file__).parents[2] / "manifests/examples/docker-run/overlay/listener.env"
    env_file = overlay.read_text().replace(
        "LISTENER_CONFIGURE_URL=https://github.com/my-org",
        f"LISTENER_CONFIGURE_URL={github.emulator.config_url()}",
    )
    (tmp_path / "listener.env").write_text(env_file.replace("my-runners", SCALE_SET))
    (tmp_path / "github-token").write_text(github.token)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f"#!{sys.executable}\n" + DOCKER_SHIM.split("\n", 1)[1])
    (bin_dir / "docker").chmod(0o755)
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        readme_teardown(),
        cwd=tmp_path,
        env={"PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert f"deleted scale set {github.scale_set_id} ({SCALE_SET})" in out.decode()
    assert github.scale_set_id not in github.emulator.state.scale_sets
