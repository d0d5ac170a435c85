"""`gha-sandbox kube` starts like a fresh cluster: no CRDs until `kubectl apply -k manifests/`
creates them, and the controller Deployment it applies rolls out with real `gha-controller`
processes that elect a leader through their own ServiceAccount and RBAC."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from sandbox.kube.testing import PROJECT_ROOT
from shared.kube.client import load_configuration
from tests.sandbox.kube.conftest import TIMEOUT
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
SYSTEM_NS = "gha-runner-scaler-system"
LEASE = "gha-runner-scale-set-controller"


@pytest.fixture
async def standalone(tmp_path: Path) -> AsyncIterator[Path]:
    kubeconfig = tmp_path / "kubeconfig"
    # As the README runs it.
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "gha-sandbox"),
        "kube",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--tls",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(TIMEOUT * 3):
            await proc.stdout.readline()
        yield kubeconfig
    finally:
        proc.terminate()
        await proc.communicate()
    assert proc.returncode == 0


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(kubeconfig.parent / "cache"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(kubeconfig.parent)},
    )
    async with asyncio.timeout(90):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_apply_k_creates_the_crds_and_the_controller_rolls_out(standalone: Path) -> None:
    code, out, err = await kubectl(standalone, "get", "crd", "-o", "name")
    assert (code, out) == (0, ""), err
    code, out, err = await kubectl(standalone, "apply", "-k", str(PROJECT_ROOT / "manifests"))
    assert code == 0, err
    assert err == ""
    assert (
        "customresourcedefinition.apiextensions.k8s.io/ephemeralrunners.actions.github.com created"
        in out
    )
    code, out, err = await kubectl(
        standalone,
        "rollout",
        "status",
        "deployment/gha-controller",
        "-n",
        SYSTEM_NS,
        "--timeout=80s",
    )
    assert code == 0, err
    assert 'deployment "gha-controller" successfully rolled out' in out
    async with client.ApiClient(await load_configuration(str(standalone))) as api:
        pods = await client.CoreV1Api(api).list_namespaced_pod(
            SYSTEM_NS, label_selector="app.kubernetes.io/name=gha-controller"
        )
        names = {p.metadata.name for p in pods.items}
        assert len(names) == 2
        assert all(p.status.container_statuses[0].ready for p in pods.items)

        async def holder() -> str:
            async with asyncio.timeout(TIMEOUT * 3):
                while True:
                    with contextlib.suppress(client.ApiException):
                        lease = await client.CoordinationV1Api(api).read_namespaced_lease(
                            LEASE, SYSTEM_NS
                        )
                        if lease.spec.holder_identity:
                            return str(lease.spec.holder_identity)
                    await asyncio.sleep(0.1)

        assert await holder()
