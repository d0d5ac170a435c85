"""The credentials of the README's "Run a listener with docker run", run as written: a token of
the listener's ServiceAccount that expires (`kubectl create token --duration`), named by the
kubeconfig as a file that "Rotating the listener's token" replaces, and the GitHub PAT in a file
instead of the environment.

kubectl sends a bearer token over https only, so the emulator serves TLS here.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from tests.listener.conftest import (
    PROJECT,
    Cluster,
    GitHub,
    Process,
    listener_config,
    wait_ready,
)
from tests.listener.test_e2e_config import scales_to, stops_cleanly

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
README_NAMESPACE = "arc-runners"
# A guard against a hung subprocess, not a performance limit.
SHELL_GUARD_SECONDS = 60


def readme_section() -> str:
    readme = (PROJECT / "README.md").read_text()
    return readme.split("## Run a listener with `docker run`", 1)[1].split("\n## ", 1)[0]


def docker_run_step(number: int) -> str:
    """Step `number` of the README's docker-run commands, exactly as written."""
    readme = (PROJECT / "README.md").read_text()
    section = readme.split("## Run a listener with `docker run`", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found is not None, "the docker-run section has no sh block"
    block = found.group(1)
    start = block.index(f"# {number}. ")
    end = block.find(f"# {number + 1}. ", start)
    return block[start:] if end < 0 else block[start:end]


@pytest.fixture
async def kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(kubelet=False, tls=True) as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


async def run_shell(script: str, *, cwd: Path, **environment: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        script,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), **environment},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), SHELL_GUARD_SECONDS)
    assert proc.returncode == 0, err.decode()


async def test_the_readmes_credentials_authenticate_the_listener(
    cluster: Cluster, github: GitHub, spawn: Any, tmp_path: Path
) -> None:
    """Before: step 4 read a token that never expires from a ServiceAccount token Secret into
    the kubeconfig. Now the token is a TokenRequest's, for 24 hours, in a file the kubeconfig
    names; the rotation's commands replace it with another that works too."""
    admin = tmp_path / "admin.kubeconfig"
    cluster.kube.write_kubeconfig(admin)
    work = tmp_path / "work"
    work.mkdir()
    # Step 4 applies the overlay first: the ServiceAccount and its Role are the fixture's here.
    step4 = docker_run_step(4).replace("kubectl apply -k .\n", "")
    await run_shell(
        step4.replace(README_NAMESPACE, cluster.namespace), cwd=work, KUBECONFIG=str(admin)
    )
    [write_pat] = [line for line in docker_run_step(2).splitlines() if "> github-token" in line]
    await run_shell(write_pat, cwd=work, GITHUB_PAT=github.token)

    token_file = work / "token" / "listener.token"
    user = cluster.kube.tokens.lookup(token_file.read_text().strip())
    assert user is not None
    assert user.name == cluster.listener_user
    assert (
        cluster.kube.tokens.expiry[token_file.read_text().strip()] > cluster.kube.registry.clock()
    )
    kubeconfig = yaml.safe_load((work / "listener.kubeconfig").read_text())
    assert kubeconfig["users"][0]["user"] == {"tokenFile": "token/listener.token"}

    process: Process = await spawn(
        listener_config(cluster, github),
        KUBECONFIG=str(work / "listener.kubeconfig"),
        LISTENER_GITHUB_TOKEN="",
        LISTENER_GITHUB_TOKEN_FILE=str(work / "github-token"),
    )
    await wait_ready(process)
    github.enqueue(1)
    await scales_to(cluster, 1)
    patches = cluster.kube.requests.count(
        user=cluster.listener_user, resource="ephemeralrunnersets", code=200
    )
    assert patches > 0
    await stops_cleanly(process)

    rotation = re.findall(r"```sh\n(.*?)```", readme_section().split("### Rotating", 1)[1], re.S)[0]
    old = token_file.read_text()
    await run_shell(
        rotation.replace("cd ~/gha-listeners/my-runners\n", "").replace(
            README_NAMESPACE, cluster.namespace
        ),
        cwd=work,
        KUBECONFIG=str(admin),
    )
    new = token_file.read_text().strip()
    assert new != old.strip()
    rotated = cluster.kube.tokens.lookup(new)
    assert rotated is not None
    assert rotated.name == cluster.listener_user
    assert not (work / "token" / "listener.token.new").exists()
