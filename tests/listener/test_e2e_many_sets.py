"""One listener process for many scale sets (docs/listener.md, "Many scale sets in one process"):
each set has its own session and credentials, a set that fails for good ends the process as a
single set's failure does, and SIGTERM deletes every session."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from listener.app import ScaleSet, credentials_of, serve, serve_many
from listener.config import ListenerSettings
from shared.actions.models import RunnerScaleSet
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.objects import ROLE
from tests.listener.conftest import (
    GHA_LISTENER,
    LISTENER_RBAC,
    RUNNER_SET,
    Cluster,
    GitHub,
    eventually,
)
from tests.listener.test_e2e_job_started import recorded, start_job_on

OTHER_SET = "other-runners"


async def add_other_set(cluster: Cluster, github: GitHub) -> int:
    """A second EphemeralRunnerSet beside the first, the listener Role widened to patch it too,
    and its scale set registered; its scale set id."""
    first = await cluster.objects.get(EPHEMERAL_RUNNER_SET, cluster.namespace, RUNNER_SET)
    other = {
        "apiVersion": first["apiVersion"],
        "kind": first["kind"],
        "metadata": {"name": OTHER_SET, "namespace": cluster.namespace},
        "spec": copy.deepcopy(first["spec"]),
    }
    await cluster.objects.create(EPHEMERAL_RUNNER_SET, cluster.namespace, other)
    [role] = [d for d in yaml.safe_load_all(LISTENER_RBAC.read_text()) if d["kind"] == "Role"]
    role["rules"][1]["resourceNames"] = [RUNNER_SET, OTHER_SET]
    await cluster.objects.patch(
        ROLE, cluster.namespace, role["metadata"]["name"], {"rules": role["rules"]}
    )
    created = await github.client.create_runner_scale_set(
        RunnerScaleSet(name=OTHER_SET, runner_group_id=1)
    )
    return created.id


def set_config(cluster: Cluster, github: GitHub, name: str, scale_set_id: int) -> dict[str, Any]:
    return {
        "configure_url": github.emulator.config_url(),
        "ephemeral_runner_set_namespace": cluster.namespace,
        "ephemeral_runner_set_name": name,
        "runner_scale_set_id": scale_set_id,
        "max_runners": 10,
        "metrics_addr": "127.0.0.1:0",
        "retry_initial_seconds": 0.01,
        "retry_max_seconds": 0.1,
        "long_poll_timeout_seconds": 5,
        "kube_request_timeout_seconds": 2,
    }


def patches_of(cluster: Cluster, name: str) -> int:
    return sum(
        1
        for r in cluster.kube.requests.log
        if r.verb == "patch"
        and r.resource == "ephemeralrunnersets"
        and r.user == cluster.listener_user
        and r.code == 200
        and r.path.endswith(f"/{name}")
    )


async def test_a_set_refused_for_good_ends_the_process_not_ready_first(
    cluster: Cluster,
    github: GitHub,
    tmp_path: Path,
    monkeypatch: Any,
) -> None:
    """Set A serves while set B loses its Role rule: B's next patch is refused, /readyz names
    B, every session is deleted and the process exits 1, as a single set's listener does
    (docs/listener.md#when-a-scale-set-fails); A had recorded its job and reported its own
    metrics series meanwhile."""
    other_id = await add_other_set(cluster, github)
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    configs = [
        ListenerSettings(**set_config(cluster, github, name, set_id), github_token=github.token)
        for name, set_id in ((RUNNER_SET, github.scale_set_id), (OTHER_SET, other_id))
    ]
    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_many(
            [ScaleSet(s, credentials_of(s)) for s in configs],
            stop=stop,
            on_listening=port.set_result,
        )
    )
    state = github.emulator.state
    try:
        await cluster.create_runner("runner-a", phase="Pending")
        await start_job_on(github, "runner-a")
        status = await recorded(cluster, "runner-a")
        assert status["phase"] == "Running"

        async def both_open() -> bool:
            return len(state.sessions) == 2 and patches_of(cluster, OTHER_SET) >= 1

        await eventually(both_open, what="a session and a set patch for each set")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{await port}/metrics") as response:
                text = await response.text()
            families = {family.name: family for family in text_string_to_metric_families(text)}
            names = {sample.labels["name"] for sample in families["gha_max_runners"].samples}
            assert names == {RUNNER_SET, OTHER_SET}
            # Hold the sessions' deletion on the way out, so /readyz can be read before the exit.
            github.emulator.faults.inject("delete_session", latency=3.0)
            [role] = [
                d for d in yaml.safe_load_all(LISTENER_RBAC.read_text()) if d["kind"] == "Role"
            ]
            await cluster.objects.patch(
                ROLE, cluster.namespace, role["metadata"]["name"], {"rules": role["rules"]}
            )
            github.emulator.enqueue_job(labels=[OTHER_SET])
            readyz = f"http://127.0.0.1:{await port}/readyz"

            async def b_named() -> bool:
                async with http.get(readyz) as response:
                    body = await response.text()
                return response.status == 503 and f"{cluster.namespace}/{OTHER_SET}" in body

            await eventually(b_named, what="/readyz naming the set whose patch is refused")
        assert await asyncio.wait_for(task, 15) == 1
    finally:
        stop.set()
    assert state.count("delete_session", status=204) == 2
    assert state.sessions == {}


async def test_sigterm_deletes_every_sets_session(
    cluster: Cluster, github: GitHub, tmp_path: Path
) -> None:
    """The real process, a config directory of two sets: both sessions open, SIGTERM, exit 0,
    both sessions deleted."""
    other_id = await add_other_set(cluster, github)
    folder = tmp_path / "sets"
    folder.mkdir()
    for name, scale_set_id in ((RUNNER_SET, github.scale_set_id), (OTHER_SET, other_id)):
        (folder / f"{name}.json").write_text(
            json.dumps(set_config(cluster, github, name, scale_set_id))
        )
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LISTENER_CONFIG_PATH": str(folder),
        "LISTENER_GITHUB_TOKEN": github.token,
        "KUBECONFIG": str(kubeconfig),
    }
    proc = await asyncio.create_subprocess_exec(
        GHA_LISTENER,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    state = github.emulator.state
    try:

        async def both_open() -> bool:
            return (
                len(state.sessions) == 2
                and min(patches_of(cluster, RUNNER_SET), patches_of(cluster, OTHER_SET)) >= 1
            )

        await eventually(both_open, what="a session and a set patch for each set")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert state.count("delete_session", status=204) == 2
    assert state.sessions == {}


@pytest.mark.parametrize("shape", ["serve", "serve_many-one-set", "serve_many-two-sets"])
async def test_one_set_and_many_fail_the_same_way(
    cluster: Cluster,
    github: GitHub,
    tmp_path: Path,
    monkeypatch: Any,
    caplog: pytest.LogCaptureFixture,
    shape: str,
) -> None:
    """One failure rule for every composition: the set whose PAT is refused is logged as
    stopped, named by its `scale_set` field, and the process exits 1 with no session left,
    whether it runs alone or beside a set that works."""
    other_id = await add_other_set(cluster, github)
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    revoked = github.emulator.add_pat()
    github.emulator.credentials.pats.discard(revoked)
    good = ListenerSettings(
        **set_config(cluster, github, RUNNER_SET, github.scale_set_id), github_token=github.token
    )
    bad = ListenerSettings(**set_config(cluster, github, OTHER_SET, other_id), github_token=revoked)
    stop = asyncio.Event()
    if shape == "serve":
        ran = serve(bad, credentials_of(bad), stop=stop)
    else:
        configs = [good, bad] if shape == "serve_many-two-sets" else [bad]
        ran = serve_many([ScaleSet(s, credentials_of(s)) for s in configs], stop=stop)
    try:
        assert await asyncio.wait_for(ran, 15) == 1
    finally:
        stop.set()
    [stopped] = [r for r in caplog.records if r.name == "listener" and r.levelno >= logging.ERROR]
    assert stopped.getMessage().startswith("listener stopped: ")
    assert getattr(stopped, "scale_set", None) == f"{cluster.namespace}/{OTHER_SET}"
    assert github.emulator.state.sessions == {}
