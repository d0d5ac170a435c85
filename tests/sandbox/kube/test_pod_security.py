"""The emulator's Pod Security admission (docs/sandbox-kube.md#pod-security), through the real
client and kubectl: what a v1.32 server refuses in a namespace labelled for a level, in its
words, what it only warns about, and the labels it refuses."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.test_kubectl import KUBECTL

Obj = dict[str, Any]
PSA = "pod-security.kubernetes.io/"
RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""A container context that meets `restricted` on its own."""


@dataclass
class Cluster:
    kube: KubeEmulator
    core: client.CoreV1Api
    kubeconfig: Path

    async def namespace(self, name: str, **labels: str) -> str:
        await self.core.create_namespace(
            {
                "metadata": {
                    "name": name,
                    "labels": {PSA + k.replace("_", "-"): v for k, v in labels.items()},
                }
            }
        )
        return name

    async def kubectl(self, *args: str, stdin: str = "") -> tuple[int, str, str]:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.kubeconfig.parent)},
        )
        async with asyncio.timeout(30):
            out, err = await proc.communicate(stdin.encode())
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with KubeEmulator(tls=True, kubelet=False) as kube:
        kube.write_kubeconfig(tmp_path / "kubeconfig")
        async with client.ApiClient(await kube.configuration()) as api:
            yield Cluster(kube, client.CoreV1Api(api), tmp_path / "kubeconfig")


def pod(name: str = "p", *, meta: Obj | None = None, **spec: Any) -> Obj:
    spec.setdefault("containers", [{"name": "c", "image": "busybox"}])
    return {"metadata": {"name": name, **(meta or {})}, "spec": spec}


def restricted_pod(**spec: Any) -> Obj:
    return pod(
        containers=[{"name": "c", "image": "busybox", "securityContext": RESTRICTED}], **spec
    )


async def refusal(cluster: Cluster, namespace: str, body: Obj) -> str:
    with pytest.raises(client.ApiException) as raised:
        await cluster.core.create_namespaced_pod(namespace, body)
    status: Obj = json.loads(raised.value.body)
    assert (raised.value.status, status["reason"]) == (403, "Forbidden")
    assert status["details"] == {"name": body["metadata"]["name"], "kind": "pods"}
    message: str = status["message"]
    return message


async def test_a_plain_pod_is_refused_in_the_real_servers_words(cluster: Cluster) -> None:
    ns = await cluster.namespace("r", enforce="restricted")
    assert await refusal(cluster, ns, pod("x")) == (
        'pods "x" is forbidden: violates PodSecurity "restricted:latest": '
        "allowPrivilegeEscalation != false "
        '(container "c" must set securityContext.allowPrivilegeEscalation=false), '
        "unrestricted capabilities "
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )
    assert cluster.kube.store.get(("", "pods"), ns, "x") is None


ROOT_CONTEXT = {**RESTRICTED, "runAsUser": 0, "privileged": True}


@pytest.mark.parametrize(
    ("level", "body", "reasons"),
    [
        pytest.param(
            "restricted",
            restricted_pod(hostPID=True, hostNetwork=True),
            "host namespaces (hostNetwork=true, hostPID=true)",
            id="host-namespaces",
        ),
        pytest.param(
            "restricted",
            restricted_pod(
                volumes=[
                    {"name": "root", "hostPath": {"path": "/"}},
                    {"name": "creds", "secret": {"secretName": "s"}},
                    {"name": "share", "nfs": {"server": "n", "path": "/"}},
                ]
            ),
            'restricted volume types (volumes "root", "share" use restricted volume types '
            '"hostPath", "nfs")',
            id="volumes",
        ),
        pytest.param(
            "baseline",
            pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
            'hostPath volumes (volume "root")',
            id="baseline-host-path",
        ),
        pytest.param(
            "restricted",
            pod(containers=[{"name": "c", "image": "i", "securityContext": ROOT_CONTEXT}]),
            'privileged (container "c" must not set securityContext.privileged=true), '
            'runAsUser=0 (container "c" must not set runAsUser=0)',
            id="privileged-root",
        ),
        pytest.param(
            "restricted",
            pod(
                containers=[
                    {
                        "name": "c",
                        "image": "i",
                        "ports": [{"containerPort": 80, "hostPort": 80}],
                        "securityContext": {
                            **RESTRICTED,
                            "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN", "NET_RAW"]},
                            "procMount": "Unmasked",
                            "seccompProfile": {"type": "Unconfined"},
                            "seLinuxOptions": {"user": "root", "type": "spc_t"},
                        },
                    }
                ],
                securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
            ),
            'hostPort (container "c" uses hostPort 80), '
            'procMount (container "c" must not set securityContext.procMount to "Unmasked"), '
            'seLinuxOptions (container "c" set forbidden securityContext.seLinuxOptions: '
            'type "spc_t"; user may not be set), '
            "forbidden sysctls (kernel.msgmax), "
            'unrestricted capabilities (container "c" must not include "NET_RAW", "SYS_ADMIN" '
            "in securityContext.capabilities.add), "
            'seccompProfile (container "c" must not set securityContext.seccompProfile.type to '
            '"Unconfined")',
            id="container-escapes",
        ),
        pytest.param(
            "baseline",
            pod(
                meta={
                    "annotations": {
                        "container.apparmor.security.beta.kubernetes.io/c": "unconfined"
                    }
                },
                containers=[
                    {
                        "name": "c",
                        "image": "i",
                        "securityContext": {"windowsOptions": {"hostProcess": True}},
                    }
                ],
            ),
            "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
            '"container.apparmor.security.beta.kubernetes.io/c="unconfined""), '
            'hostProcess (container "c" must not set securityContext.windowsOptions.hostProcess'
            "=true)",
            id="apparmor-host-process",
        ),
    ],
)
async def test_what_each_level_refuses(
    cluster: Cluster, level: str, body: Obj, reasons: str
) -> None:
    ns = await cluster.namespace("n", enforce=level)
    message = await refusal(cluster, ns, body)
    assert message == f'pods "p" is forbidden: violates PodSecurity "{level}:latest": {reasons}'


@pytest.mark.parametrize(
    ("labels", "body"),
    [
        pytest.param({"enforce": "restricted"}, restricted_pod(), id="restricted-pod"),
        pytest.param(
            {"enforce": "restricted"},
            pod(
                containers=[
                    {
                        "name": "c",
                        "image": "i",
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
                securityContext={
                    "runAsNonRoot": True,
                    "runAsUser": 10001,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                volumes=[
                    {"name": "cfg", "secret": {"secretName": "s"}},
                    {"name": "t", "emptyDir": {}},
                ],
            ),
            id="pod-level-context-secret-volume",
        ),
        pytest.param({"enforce": "baseline"}, pod(), id="baseline-plain"),
        pytest.param({}, pod(hostPID=True), id="unlabelled"),
        pytest.param({"enforce": "privileged"}, pod(hostPID=True), id="privileged"),
        pytest.param(
            {"enforce": "restricted", "enforce_version": "v1.22"},
            restricted_pod(securityContext={"runAsUser": 0}),
            id="runAsUser-before-its-check",
        ),
        pytest.param(
            {"enforce": "restricted"},
            pod(
                os={"name": "windows"},
                securityContext={"runAsNonRoot": True},
            ),
            id="windows-exempt-from-linux-fields",
        ),
    ],
)
async def test_what_is_admitted(cluster: Cluster, labels: dict[str, str], body: Obj) -> None:
    ns = await cluster.namespace("n", **labels)
    await cluster.core.create_namespaced_pod(ns, body)


async def test_a_pinned_version_names_itself(cluster: Cluster) -> None:
    ns = await cluster.namespace("n", enforce="restricted", enforce_version="v1.22")
    message = await refusal(cluster, ns, restricted_pod(hostIPC=True))
    assert message.startswith('pods "p" is forbidden: violates PodSecurity "restricted:v1.22": ')


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_shows_the_refusal_and_the_warnings(cluster: Cluster) -> None:
    await cluster.namespace("enforced", enforce="restricted")
    await cluster.namespace("warned", warn="baseline")
    code, _, err = await cluster.kubectl(
        "-n", "enforced", "run", "x", "--image=busybox", "--restart=Never"
    )
    assert code == 1
    assert 'Error from server (Forbidden): pods "x" is forbidden: violates PodSecurity' in err
    code, _, err = await cluster.kubectl(
        "-n", "warned", "run", "x", "--image=busybox", "--restart=Never", "--privileged"
    )
    assert code == 0, err
    assert (
        'Warning: would violate PodSecurity "baseline:latest": privileged '
        '(container "x" must not set securityContext.privileged=true)'
    ) in err
    # A workload's template is only warned about (warn follows an explicit enforce), and made.
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    code, _, err = await cluster.kubectl(
        "-n", "enforced", "create", "-f", "-", stdin=json.dumps(deployment)
    )
    assert code == 0, err
    assert 'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation' in err


async def test_a_label_that_is_not_a_level_is_refused(cluster: Cluster) -> None:
    with pytest.raises(client.ApiException) as raised:
        await cluster.namespace("n", enforce="strict")
    status = json.loads(raised.value.body)
    assert raised.value.status == 422
    assert status["message"] == (
        'Namespace "n" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
        'Invalid value: "strict": must be one of privileged, baseline, restricted'
    )
    await cluster.namespace("m", enforce="baseline")
    with pytest.raises(client.ApiException) as raised:
        await cluster.core.patch_namespace(
            "m", {"metadata": {"labels": {PSA + "warn-version": "1.32"}}}
        )
    assert raised.value.status == 422


async def test_an_image_change_is_judged_again(cluster: Cluster) -> None:
    """The real plugin looks at a pod update only when it changes an image (the rest of a
    pod's spec is immutable): a pod made before the label keeps running and may be labelled."""
    ns = await cluster.namespace("n")
    await cluster.core.create_namespaced_pod(ns, pod(hostPID=True))
    await cluster.core.patch_namespace(ns, {"metadata": {"labels": {PSA + "enforce": "baseline"}}})
    await cluster.core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(client.ApiException) as raised:
        await cluster.core.patch_namespaced_pod(
            "p", ns, {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}
        )
    assert raised.value.status == 403
    assert "host namespaces (hostPID=true)" in json.loads(raised.value.body)["message"]
