"""The kubectl v1.32 flows this project relies on, run as subprocesses against the emulator.

kubectl runs with asyncio subprocesses so the emulator, serving in this event loop, keeps
answering. The emulator serves TLS here, because kubectl sends no bearer token over plain http.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.testing import PROJECT_ROOT, project_crds
from tests.sandbox.kube.conftest import (
    FIXTURES,
    GROUP,
    MERGE,
    TIMEOUT,
    VERSION,
    WIDGETS,
    wait_for,
    widget,
)

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
SMOKE_NS = "bars-runners"
ER = ("actions.github.com", "ephemeralrunners")
RUNNER_A = ("ephemeralrunner", "bars-runner-a", "-n", SMOKE_NS)


@dataclass
class Kubectl:
    kube: KubeEmulator
    kubeconfig: Path
    cache: Path

    def argv(self, *args: str) -> list[str]:
        assert KUBECTL is not None
        return [
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache),
            "--request-timeout=20s",
            *args,
        ]

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.cache.parent)},
        )

    async def __call__(self, *args: str) -> tuple[int, str, str]:
        proc = await self.start(*args)
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    async def ok(self, *args: str) -> str:
        code, out, err = await self(*args)
        assert code == 0, err
        return out


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with KubeEmulator(tls=True) as kube:
        kube.apply_crds([*project_crds(), FIXTURES / "widgets-crd.yaml"])
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        yield Kubectl(kube, tmp_path / "kubeconfig", tmp_path / "cache")


@pytest.fixture
async def smoke(kubectl: Kubectl) -> Kubectl:
    if not project_crds():
        pytest.skip("manifests/crds is absent")
    await kubectl.ok("apply", "-f", str(FIXTURES / "kubectl-smoke-objects.yaml"))
    return kubectl


def resize(kube: KubeEmulator, name: str, size: int) -> None:
    rt = kube.catalog.get(GROUP, version=VERSION, plural=WIDGETS)
    assert rt is not None
    kube.registry.patch(
        rt, ns="default", name=name, content_type=MERGE, body={"spec": {"size": size}}
    )


def runner(kube: KubeEmulator) -> dict[str, Any]:
    obj = kube.store.get(ER, SMOKE_NS, "bars-runner-a")
    assert obj is not None
    return obj


@pytest.mark.skipif(
    not (PROJECT_ROOT / "manifests" / "kustomization.yaml").exists(),
    reason="manifests/ has no kustomization yet",
)
async def test_apply_kustomize_manifests(kubectl: Kubectl) -> None:
    await kubectl.ok("apply", "-k", str(PROJECT_ROOT / "manifests"))
    await kubectl.ok(
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        "crd/ephemeralrunners.actions.github.com",
    )


async def test_apply_creates_the_objects_with_last_applied(smoke: Kubectl) -> None:
    obj = runner(smoke.kube)
    assert obj["metadata"]["finalizers"] == ["bars.example.com/hold"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    again = await smoke.ok("apply", "-f", str(FIXTURES / "kubectl-smoke-objects.yaml"))
    assert "ephemeralrunner.actions.github.com/bars-runner-a unchanged" in again


async def test_reapply_with_a_change_patches(smoke: Kubectl, tmp_path: Path) -> None:
    text = (FIXTURES / "kubectl-smoke-objects.yaml").read_text()
    changed = tmp_path / "changed.yaml"
    changed.write_text(text.replace("runnerScaleSetId: 7", "runnerScaleSetId: 8"))
    out = await smoke.ok("apply", "-f", str(changed))
    assert "ephemeralrunner.actions.github.com/bars-runner-a configured" in out
    assert runner(smoke.kube)["spec"]["runnerScaleSetId"] == 8
    assert runner(smoke.kube)["metadata"]["generation"] == 2


async def test_get_json(smoke: Kubectl) -> None:
    out = await smoke.ok("get", "ephemeralrunners", "-n", SMOKE_NS, "bars-runner-a", "-o", "json")
    obj = json.loads(out)
    assert obj["spec"]["runnerScaleSetId"] == 7
    assert obj["metadata"]["uid"] == runner(smoke.kube)["metadata"]["uid"]


async def test_get_table_shows_printer_columns(kubectl: Kubectl) -> None:
    kubectl.kube.apply(widget("w1", 42))
    out = await kubectl.ok("get", "widgets")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "SIZE", "AGE"]
    assert row.split()[:2] == ["w1", "42"]


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (["--type=merge", "-p", '{"spec":{"runnerScaleSetId":9}}'], "spec", 9),
        (
            ["--subresource=status", "--type=merge", "-p", '{"status":{"runnerId":42}}'],
            "status",
            42,
        ),
    ],
)
async def test_patch_merge(smoke: Kubectl, args: list[str], field: str, value: int) -> None:
    await smoke.ok("patch", *RUNNER_A, *args)
    got = runner(smoke.kube)[field]
    assert value in got.values()


async def test_status_patch_ignores_spec(smoke: Kubectl) -> None:
    await smoke.ok(
        "patch",
        *RUNNER_A,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"spec":{"runnerScaleSetId":99}}',
    )
    assert runner(smoke.kube)["spec"]["runnerScaleSetId"] == 7


async def test_strategic_patch_on_a_custom_resource_fails(smoke: Kubectl) -> None:
    code, _, err = await smoke("patch", *RUNNER_A, "-p", '{"spec":{"runnerScaleSetId":9}}')
    assert code != 0
    assert "application/strategic-merge-patch+json is not supported" in err


async def test_get_watch_streams_changes(kubectl: Kubectl) -> None:
    kube = kubectl.kube
    kube.apply(widget("w1"))
    baseline = len(kube.store.subscriptions)
    proc = await kubectl.start("get", "widgets", "w1", "-w", "-o", 'jsonpath={.spec.size}{"\\n"}')
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(TIMEOUT):
            assert (await proc.stdout.readline()).strip() == b"1"
            # kubectl skips the watch's initial ADDED, so change the object only once it watches.
            await wait_for(lambda: len(kube.store.subscriptions) > baseline)
            resize(kube, "w1", 5)
            assert (await proc.stdout.readline()).strip() == b"5"
    finally:
        proc.kill()
        await proc.wait()


async def test_delete_waits_for_finalizers(smoke: Kubectl) -> None:
    proc = await smoke.start("delete", *RUNNER_A, "--wait=true", "--timeout=20s")
    await wait_for(lambda: runner(smoke.kube)["metadata"].get("deletionTimestamp"))
    assert proc.returncode is None
    await smoke.ok("patch", *RUNNER_A, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    async with asyncio.timeout(TIMEOUT):
        await proc.communicate()
    assert proc.returncode == 0
    assert smoke.kube.store.get(ER, SMOKE_NS, "bars-runner-a") is None


async def test_wait_for_jsonpath(smoke: Kubectl) -> None:
    proc = await smoke.start(
        "wait",
        "ephemeralrunner/bars-runner-a",
        "-n",
        SMOKE_NS,
        "--for=jsonpath={.status.phase}=Running",
        "--timeout=20s",
    )
    await smoke.ok(
        "patch",
        *RUNNER_A,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Running"}}',
    )
    async with asyncio.timeout(TIMEOUT):
        out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert b"condition met" in out


@pytest.mark.parametrize(("verb", "answer"), [("get", "yes"), ("delete", "no")])
async def test_auth_can_i_as_service_account(smoke: Kubectl, verb: str, answer: str) -> None:
    _, out, _ = await smoke(
        "auth",
        "can-i",
        verb,
        "ephemeralrunners",
        "-n",
        SMOKE_NS,
        f"--as=system:serviceaccount:{SMOKE_NS}:bars-reader",
    )
    assert out.strip() == answer


async def test_create_token_authenticates_as_the_service_account(smoke: Kubectl) -> None:
    token = (await smoke.ok("create", "token", "bars-reader", "-n", SMOKE_NS)).strip()
    async with client.ApiClient(await smoke.kube.configuration(token=token)) as api:
        co = client.CustomObjectsApi(api)
        obj = await co.get_namespaced_custom_object(
            *ER[:1], "v1alpha1", SMOKE_NS, ER[1], "bars-runner-a"
        )
        assert obj["metadata"]["name"] == "bars-runner-a"
        with pytest.raises(client.ApiException) as exc:
            await co.delete_namespaced_custom_object(
                *ER[:1], "v1alpha1", SMOKE_NS, ER[1], "bars-runner-a"
            )
    assert exc.value.status == 403


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["create", "namespace", "made-by-kubectl"], (("", "namespaces"), "", "made-by-kubectl")),
        (
            ["create", "secret", "generic", "s1", "--from-literal=a=b"],
            (("", "secrets"), "default", "s1"),
        ),
        (
            ["create", "configmap", "c1", "--from-literal=a=b"],
            (("", "configmaps"), "default", "c1"),
        ),
        (["create", "serviceaccount", "sa1"], (("", "serviceaccounts"), "default", "sa1")),
    ],
)
async def test_imperative_create_sends_protobuf_the_emulator_decodes(
    kubectl: Kubectl, args: list[str], key: tuple[tuple[str, str], str, str]
) -> None:
    await kubectl.ok(*args)
    obj = kubectl.kube.store.get(*key)
    assert obj is not None
    if key[0] != ("", "namespaces") and key[0] != ("", "serviceaccounts"):
        assert obj["data"] == ({"a": "Yg=="} if key[0] == ("", "secrets") else {"a": "b"})


async def test_apply_rejects_a_misspelled_field(kubectl: Kubectl, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: test.example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\n"
        "spec: {size: 1, colour: red}\n"
    )
    code, _, err = await kubectl("apply", "-f", str(bad))
    assert code != 0
    assert 'unknown field "spec.colour"' in err
    assert kubectl.kube.store.get((GROUP, WIDGETS), "default", "w") is None


async def test_rbac_created_imperatively_is_enforced(kubectl: Kubectl) -> None:
    await kubectl.ok(
        "create", "role", "pod-reader", "--verb=get", "--resource=pods", "--resource-name=web"
    )
    await kubectl.ok(
        "create",
        "rolebinding",
        "pod-reader",
        "--role=pod-reader",
        "--serviceaccount=default:default",
    )
    binding = kubectl.kube.store.get(
        ("rbac.authorization.k8s.io", "rolebindings"), "default", "pod-reader"
    )
    assert binding is not None
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "default", "namespace": "default"}
    ]
    as_sa = "--as=system:serviceaccount:default:default"
    allowed = await kubectl("auth", "can-i", "get", "pods/web", as_sa)
    denied = await kubectl("auth", "can-i", "get", "pods/db", as_sa)
    assert (allowed[1].strip(), denied[1].strip()) == ("yes", "no")


async def test_get_watch_prints_table_rows(kubectl: Kubectl) -> None:
    kube = kubectl.kube
    kube.apply(widget("w1"))
    baseline = len(kube.store.subscriptions)
    proc = await kubectl.start("get", "widgets", "-w")
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(TIMEOUT):
            assert (await proc.stdout.readline()).split() == [b"NAME", b"SIZE", b"AGE"]
            assert (await proc.stdout.readline()).split()[:2] == [b"w1", b"1"]
            await wait_for(lambda: len(kube.store.subscriptions) > baseline)
            resize(kube, "w1", 5)
            assert (await proc.stdout.readline()).split()[:2] == [b"w1", b"5"]
    finally:
        proc.kill()
        await proc.wait()


@pytest.mark.parametrize(
    ("args", "header", "row"),
    [
        (["get", "namespace", "default"], ["NAME", "STATUS", "AGE"], ["default", "Active"]),
        (
            ["get", "node", "sandbox-node"],
            ["NAME", "STATUS", "ROLES", "VERSION", "AGE"],
            ["sandbox-node", "Ready", "<none>", "v1.32.4"],
        ),
        (
            ["get", "node", "sandbox-control-plane"],
            ["NAME", "STATUS", "ROLES", "VERSION", "AGE"],
            ["sandbox-control-plane", "Ready", "control-plane", "v1.32.4"],
        ),
        (
            ["get", "service", "kubernetes"],
            ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
            ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"],
        ),
        (
            ["get", "configmap", "kube-root-ca.crt"],
            ["NAME", "DATA", "AGE"],
            ["kube-root-ca.crt", "1"],
        ),
    ],
)
async def test_get_prints_the_builtin_columns(
    kubectl: Kubectl, args: list[str], header: list[str], row: list[str]
) -> None:
    """Nodes are asked for by name: a booted cluster has two (the control plane, which runs the
    kube-system pods, and the kubelet's worker), as a kind cluster with one worker has."""
    lines = (await kubectl.ok(*args)).splitlines()
    assert lines[0].split() == header
    assert lines[1].split()[: len(row)] == row
