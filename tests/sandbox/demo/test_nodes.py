"""`gha-sandbox node` through its real entry point (a subprocess) against a two-node emulator
serving in the test's loop, with the admin kubeconfig `up` writes into its workdir; and
`gha-sandbox demo --nodes 2 --drain-at`, judged by its JSON report."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.demo.cluster import ADMIN_KUBECONFIG
from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import MERGE, wait_for

NS = "apps"
PODS = ("", "pods")
NODES = ("", "nodes")


async def node_cli(workdir: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox",
        "node",
        *args,
        "--workdir",
        str(workdir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )


async def finished(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def app(name: str, replicas: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(tls=True, nodes=2) as kube:
        kube.write_kubeconfig(tmp_path / ADMIN_KUBECONFIG)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield kube


def running(kube: KubeEmulator, app_name: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.store.items(PODS, NS)
        if p["metadata"]["labels"].get("app") == app_name
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("podIP")
    ]


async def test_node_drain_retries_a_refused_eviction_then_completes(
    sandbox: KubeEmulator, tmp_path: Path
) -> None:
    kube = sandbox
    kube.apply(app("web", 4, {"app": "web"}))
    kube.apply(app("runner", 1, {"app": "runner", "busy": "true"}))
    kube.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "busy", "namespace": NS},
            "spec": {"minAvailable": 2147483647, "selector": {"matchLabels": {"busy": "true"}}},
        }
    )
    await wait_for(lambda: len(running(kube, "web")) == 4 and running(kube, "runner"))
    busy = running(kube, "runner")[0]
    node = busy["spec"]["nodeName"]

    code, out, _ = await finished(await node_cli(tmp_path, "list"))
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert lines[node] == [
        "Ready",
        str(1 + sum(p["spec"]["nodeName"] == node for p in running(kube, "web"))),
    ]

    drain = await node_cli(tmp_path, "drain", node, "--retry", "0.2")
    await wait_for(
        lambda: kube.requests.count(
            verb="create", resource="pods", subresource="eviction", code=429
        )
    )
    rt = kube.catalog.preferred("apps", "deployments")
    assert rt is not None
    kube.registry.patch(
        rt, ns=NS, name="runner", content_type=MERGE, body={"spec": {"replicas": 0}}
    )
    code, out, err = await finished(drain)
    assert code == 0, err
    assert f"node/{node} cordoned" in out
    assert f"evicting pod {NS}/{busy['metadata']['name']}" in out
    assert (
        f"error when evicting pod {NS}/{busy['metadata']['name']} (will retry after 0.2s): "
        "Cannot evict pod as it would violate the pod's disruption budget." in out
    )
    assert f"node/{node} drained in" in out
    assert "eviction(s) refused by a disruption budget" in out
    refused = int(out.split("pod(s), ")[1].split(" eviction")[0])
    assert refused == kube.requests.count(
        verb="create", resource="pods", subresource="eviction", code=429
    )
    assert not [p for p in kube.store.items(PODS, NS) if p["spec"].get("nodeName") == node]
    assert (kube.store.get(NODES, "", node) or {})["spec"]["unschedulable"] is True

    code, out, _ = await finished(await node_cli(tmp_path, "uncordon", node))
    assert (code, out.strip()) == (0, f"node/{node} uncordoned")
    assert "unschedulable" not in (kube.store.get(NODES, "", node) or {})["spec"]


@pytest.mark.anywhere
async def test_node_errors_are_one_line(sandbox: KubeEmulator, tmp_path: Path) -> None:
    code, _, err = await finished(await node_cli(tmp_path, "drain", "ghost"))
    assert code == 1
    assert err == 'gha-sandbox node: drain of node/ghost failed: nodes "ghost" not found\n'
    code, _, err = await finished(await node_cli(tmp_path / "nowhere", "list"))
    assert code == 2
    assert err.count("\n") == 1
    assert "no sandbox is up" in err


def test_demo_drains_the_busiest_node_mid_burst_and_reports_it(tmp_path: Path) -> None:
    """Mid-burst (six 60 s jobs running, two idle runners), the drain of the node with the most
    runners evicts its idle runners at once, is refused (429) for its busy ones until their jobs
    end, then completes: no job is lost (docs/reconcilers.md#busy-pods). At 20 simulated seconds
    per wall second the drain comes 20 s after the jobs start: a pod is protected once the
    controller has handled its runner's promotion, not at the listener's write."""
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "sandbox", "demo", "--jobs", "6", "--duration", "60",
            "--max-runners", "8", "--min-runners", "2", "--nodes", "2", "--drain-at", "30",
            "--report", str(report_path),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    context = done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    drain = report["drain"]
    assert drain["completed"] is True, context
    assert drain["error"] is None
    assert drain["node"] in ("sandbox-node", "sandbox-node-2")
    assert drain["at_s"] >= 10
    assert drain["time_s"] > 0
    assert drain["pods_evicted"] >= 1
    assert drain["evictions_refused"] >= 1
    assert drain["jobs_lost"] == 0
    assert done.returncode == 0, context
    assert report["jobs"] == {
        "enqueued": 6,
        "completed": 6,
        "succeeded": 6,
        "failed": 0,
        "lost": 0,
    }, context
    assert report["runners"]["killed_while_busy"] == 0
    assert report["leftovers"] == {"kubernetes": [], "actions": []}
    assert f"drain of {drain['node']}" in done.stdout
