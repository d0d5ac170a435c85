"""`gha-controller`, started as a process against the emulators, runs both runner reconcilers
and serves ARC's controller gauges; authenticated as the manifests' ServiceAccount, with their
RBAC, it does its whole job without a 403, and `--watch-namespace` runs it on namespaced Roles
only."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.kube.errors import NotFound
from shared.kube.objects import (
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    Kind,
    Objects,
)
from shared.typedefs import JSONDict
from tests.controller.runtime.conftest import eventually

CONTROLLER = Path(sys.executable).with_name("gha-controller")
ROOT = Path(__file__).parents[2]
MANIFESTS = ROOT / "manifests"
SYSTEM = "gha-runner-scaler-system"
IDENTITY = f"system:serviceaccount:{SYSTEM}:gha-controller"
DEPLOYMENT = Kind("Deployment", "deployments", group="apps")
CLUSTER_ROLE = Kind("ClusterRole", "clusterroles", group="rbac.authorization.k8s.io")
CLUSTER_ROLE_BINDING = Kind(
    "ClusterRoleBinding", "clusterrolebindings", group="rbac.authorization.k8s.io"
)
PART_OF = "app.kubernetes.io/part-of=gha-runner-scaler"
RUNNERS = "arc-runners"
"""The namespace of manifests/examples/runner-namespace."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_gha_controller_registers_a_runner_and_publishes_gauges(
    tmp_path: Path, namespace: str, actions: ActionsEmulator
) -> None:
    async with KubeEmulator() as kube:
        kube.apply_crds(project_crds())
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "github-secret", "namespace": namespace},
                "data": {"github_token": base64.b64encode(actions.add_pat().encode()).decode()},
            }
        )
        scale_set = actions.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig)
        port = free_port()
        process = await asyncio.create_subprocess_exec(
            str(CONTROLLER),
            "--kubeconfig",
            str(kubeconfig),
            "--no-leader-elect",
            "--watch-namespace",
            namespace,
            "--bind-address",
            "127.0.0.1",
            "--metrics-port",
            str(port),
            "--health-port",
            str(port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        api = client.ApiClient(await kube.configuration())
        try:
            objects = Objects(api)
            await objects.create(
                EPHEMERAL_RUNNER_SET,
                namespace,
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunnerSet",
                    "metadata": {
                        "name": "arc",
                        "labels": {"actions.github.com/scale-set-name": "arc"},
                    },
                    "spec": {
                        "replicas": 1,
                        "patchID": 1,
                        "ephemeralRunnerSpec": {
                            "githubConfigUrl": actions.config_url("owner", "repo"),
                            "githubConfigSecret": "github-secret",
                            "runnerScaleSetId": scale_set.id,
                            "spec": {"containers": [{"name": "runner", "image": "runner"}]},
                        },
                    },
                },
            )
            deadline = time.monotonic() + 30
            registered = False
            while not registered and time.monotonic() < deadline:
                items = (await objects.list(EPHEMERAL_RUNNER, namespace))["items"]
                registered = bool(items) and bool(items[0].get("status", {}).get("runnerId"))
                await asyncio.sleep(0.1)
            assert registered
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/metrics") as response,
            ):
                text = await response.text()
            assert "gha_controller_pending_ephemeral_runners{" in text
            assert 'controller="ephemeralrunner"' in text
        finally:
            await api.close()
            process.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, stderr.decode()[-2000:]


async def _kubectl(kubeconfig: Path, *args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()


async def _install(
    kube: KubeEmulator, tmp_path: Path, install: Path, actions: ActionsEmulator
) -> Path:
    """Apply `install` and the runner-namespace example with kubectl, as an admin would; the
    GitHub Secret in the runner namespace; a kubeconfig of the controller's ServiceAccount."""
    admin = tmp_path / "admin.kubeconfig"
    kube.write_kubeconfig(admin)
    await _kubectl(admin, "apply", "-k", str(install))
    await _kubectl(admin, "create", "namespace", RUNNERS)
    await _kubectl(admin, "apply", "-k", str(MANIFESTS / "examples" / "runner-namespace"))
    _github_secret(kube, RUNNERS, actions)
    identity = tmp_path / "controller.kubeconfig"
    kube.write_kubeconfig(identity, token=kube.service_account_token(SYSTEM, "gha-controller"))
    return identity


def _github_secret(kube: KubeEmulator, namespace: str, actions: ActionsEmulator) -> None:
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "github-secret", "namespace": namespace},
            "data": {"github_token": base64.b64encode(actions.add_pat().encode()).decode()},
        }
    )


def _runner_set(actions: ActionsEmulator, scale_set_id: int) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "arc", "labels": {"actions.github.com/scale-set-name": "arc"}},
        "spec": {
            "replicas": 1,
            "patchID": 1,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": actions.config_url("owner", "repo"),
                "githubConfigSecret": "github-secret",
                "runnerScaleSetId": scale_set_id,
                # As ARC's chart renders it: a runner pod is never restarted in place.
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "runner", "image": "runner"}],
                },
            },
        },
    }


@contextlib.asynccontextmanager
async def _controller(
    kubeconfig: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[None]:
    """The process as its ServiceAccount, electing a leader on the manifests' Lease Role; on
    exit SIGTERM, and it must exit 0."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(CONTROLLER),
        "--kubeconfig",
        str(kubeconfig),
        "--lease-namespace",
        SYSTEM,
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--health-port",
        str(port),
        *args,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()[-2000:]


async def _registered_runner(objects: Objects, namespace: str) -> JSONDict:
    found: list[JSONDict] = []

    async def registered() -> bool:
        items = (await objects.list(EPHEMERAL_RUNNER, namespace))["items"]
        found[:] = [r for r in items if (r.get("status") or {}).get("runnerId")]
        return bool(found)

    await eventually(registered, within=30)
    return found[0]


async def test_a_runner_lifecycle_under_the_manifests_rbac_sees_no_403(
    tmp_path: Path, actions: ActionsEmulator
) -> None:
    """Install, runner-namespace component, a runner that registers, takes a job, finishes and
    is cleaned up, then the set deleted through its finalizer: every request the controller
    makes as its ServiceAccount is allowed."""
    actions.state.require_acquire = False
    async with KubeEmulator(tls=True, container_runtime=actions.runtime) as kube:
        kubeconfig = await _install(kube, tmp_path, MANIFESTS, actions)
        scale_set = actions.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        api = client.ApiClient(await kube.configuration())
        try:
            objects = Objects(api)
            async with _controller(kubeconfig):
                await objects.create(
                    EPHEMERAL_RUNNER_SET, RUNNERS, _runner_set(actions, scale_set.id)
                )
                runner = await _registered_runner(objects, RUNNERS)
                name, rid = runner["metadata"]["name"], runner["status"]["runnerId"]

                async def online() -> bool:
                    found = actions.state.runners.get(rid)
                    return found is not None and found.online

                await eventually(online, within=30)
                job = actions.enqueue_job(labels=["arc"], duration=30)

                async def started() -> bool:
                    return actions.state.jobs[job].state == "started"

                await eventually(started, within=30)
                # The listener's part: JobStarted.
                await objects.patch(
                    EPHEMERAL_RUNNER,
                    RUNNERS,
                    name,
                    {"status": {"phase": "Running", "jobId": "job-1", "jobRequestId": job}},
                    status=True,
                )
                # The listener's count for the finished job, under a new patch id, before the
                # runner ends; the runner then deletes itself and nothing replaces it
                # (docs/reconcilers.md#a-runner-that-succeeded).
                await objects.patch(
                    EPHEMERAL_RUNNER_SET, RUNNERS, "arc", {"spec": {"replicas": 0, "patchID": 2}}
                )
                actions.state.finish_job(job)

                async def runner_and_pod_gone() -> bool:
                    runners = (await objects.list(EPHEMERAL_RUNNER, RUNNERS))["items"]
                    try:
                        await objects.get(POD, RUNNERS, name)
                    except NotFound:
                        return not runners
                    return False

                await eventually(runner_and_pod_gone, within=30)
                await objects.delete(EPHEMERAL_RUNNER_SET, RUNNERS, "arc")

                async def set_gone() -> bool:
                    sets = (await objects.list(EPHEMERAL_RUNNER_SET, RUNNERS))["items"]
                    return not sets

                await eventually(set_gone, within=30)
        finally:
            await api.close()
        requests = kube.requests
        assert requests.count(user=IDENTITY, code=403) == 0, requests.summary()
        # The job was done: each write of the runner reconcilers happened, as this identity.
        for verb, resource, subresource in [
            ("list", "ephemeralrunnersets", ""),
            ("watch", "pods", ""),
            ("get", "secrets", ""),
            ("create", "secrets", ""),
            ("create", "ephemeralrunners", ""),
            ("patch", "ephemeralrunners", "status"),
            ("patch", "ephemeralrunnersets", "status"),
            ("create", "pods", ""),
            ("delete", "ephemeralrunners", ""),
            ("update", "leases", ""),
        ]:
            assert requests.count(
                user=IDENTITY, verb=verb, resource=resource, subresource=subresource
            ), (verb, resource, subresource, requests.summary())


LISTENER_POD = "app.kubernetes.io/component=runner-scale-set-listener"
"""The listener pods among the controller namespace's (the emulator also runs the Deployment's)."""
HELM_MADE = [
    (SERVICE_ACCOUNT, "actions.github.com/cleanup-kubernetes-mode-service-account-name"),
    (ROLE, "actions.github.com/cleanup-manager-role-name"),
    (SECRET, "actions.github.com/cleanup-github-secret-name"),
]
"""Objects the scale-set chart makes next to an AutoscalingRunnerSet, each with ARC's cleanup
finalizer, named by the set's annotation."""


async def test_an_autoscaling_runner_set_lifecycle_under_the_manifests_rbac_sees_no_403(
    tmp_path: Path, actions: ActionsEmulator
) -> None:
    """In-cluster mode (the Deployment's two ARC variables): an AutoscalingRunnerSet gets its
    scale set, runner set and listener with its pod, ServiceAccount, config Secret, Role and
    RoleBinding; deleting it unwinds all of that and strips the Helm objects' finalizers. The
    controller, as its ServiceAccount, is never refused."""
    async with KubeEmulator(tls=True) as kube:
        kubeconfig = await _install(kube, tmp_path, MANIFESTS, actions)
        for kind, _ in HELM_MADE:
            if kind == SECRET:
                continue
            body: JSONDict = {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "metadata": {
                    "name": "helm-made",
                    "namespace": RUNNERS,
                    "finalizers": ["actions.github.com/cleanup-protection"],
                },
            }
            if kind == ROLE:
                body["rules"] = []
            kube.apply(body)
        api = client.ApiClient(await kube.configuration())
        try:
            objects = Objects(api)
            await objects.patch(
                SECRET,
                RUNNERS,
                "github-secret",
                {"metadata": {"finalizers": ["actions.github.com/cleanup-protection"]}},
            )
            names = {annotation: "helm-made" for kind, annotation in HELM_MADE if kind != SECRET}
            await objects.create(
                AUTOSCALING_RUNNER_SET,
                RUNNERS,
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "AutoscalingRunnerSet",
                    "metadata": {
                        "name": "arc",
                        "annotations": {
                            **names,
                            "actions.github.com/cleanup-github-secret-name": "github-secret",
                        },
                    },
                    "spec": {
                        "githubConfigUrl": actions.config_url("owner", "repo"),
                        "githubConfigSecret": "github-secret",
                        "minRunners": 0,
                        "maxRunners": 2,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "runner", "image": "runner"}],
                            }
                        },
                    },
                },
            )
            in_cluster = {
                "CONTROLLER_MANAGER_POD_NAMESPACE": SYSTEM,
                "CONTROLLER_MANAGER_CONTAINER_IMAGE": "gha-runner-scaler:0.1.0",
            }
            async with _controller(kubeconfig, env=in_cluster):

                async def listener_running() -> bool:
                    found = (await objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
                    if not found:
                        return False
                    name = found[0]["metadata"]["name"]
                    made = [
                        (POD, SYSTEM, name),
                        (SERVICE_ACCOUNT, SYSTEM, name),
                        (SECRET, SYSTEM, f"{name}-config"),
                        (ROLE, RUNNERS, name),
                        (ROLE_BINDING, RUNNERS, name),
                        (EPHEMERAL_RUNNER_SET, RUNNERS, "arc"),
                    ]
                    for kind, namespace, object_name in made:
                        try:
                            await objects.get(kind, namespace, object_name)
                        except NotFound:
                            return False
                    return True

                await eventually(listener_running, within=30)
                await objects.delete(AUTOSCALING_RUNNER_SET, RUNNERS, "arc")

                async def unwound() -> bool:
                    left = [
                        *(await objects.list(AUTOSCALING_RUNNER_SET, RUNNERS))["items"],
                        *(await objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"],
                        *(await objects.list(EPHEMERAL_RUNNER_SET, RUNNERS))["items"],
                        *(await objects.list(POD, SYSTEM, label_selector=LISTENER_POD))["items"],
                    ]
                    return not left

                await eventually(unwound, within=30)
            for kind, annotation in HELM_MADE:
                name = "github-secret" if kind == SECRET else "helm-made"
                made = await objects.get(kind, RUNNERS, name)
                assert not made["metadata"].get("finalizers"), annotation
        finally:
            await api.close()
        requests = kube.requests
        assert requests.count(user=IDENTITY, code=403) == 0, requests.summary()
        for verb, resource, namespace in [
            ("create", "ephemeralrunnersets", RUNNERS),
            ("create", "autoscalinglisteners", SYSTEM),
            ("create", "pods", SYSTEM),
            ("create", "secrets", SYSTEM),
            ("create", "serviceaccounts", SYSTEM),
            ("create", "roles", RUNNERS),
            ("create", "rolebindings", RUNNERS),
            ("delete", "ephemeralrunnersets", RUNNERS),
            ("patch", "secrets", RUNNERS),
            ("patch", "roles", RUNNERS),
            ("patch", "serviceaccounts", RUNNERS),
        ]:
            assert requests.count(
                user=IDENTITY, verb=verb, resource=resource, namespace=namespace
            ), (verb, resource, namespace, requests.summary())


def doc_kustomization(tmp_path: Path, doc: str, heading: str) -> Path:
    """The first YAML block under `heading` of docs/`doc`, a kustomization naming the checkout
    `gha-runner-scaler/`, written to a directory of its own with that path pointed at this one."""
    section = (ROOT / "docs" / doc).read_text().split(heading, 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    checkout = os.path.relpath(ROOT, overlay)
    (overlay / "kustomization.yaml").write_text(
        block.replace("gha-runner-scaler/manifests", f"{checkout}/manifests")
    )
    return overlay


@pytest.fixture
def namespaced_install(tmp_path: Path) -> Path:
    """docs/install.md's kustomization for a controller on namespaced Roles only."""
    return doc_kustomization(tmp_path, "install.md", "## One controller per namespace")


async def test_watch_namespace_runs_on_namespaced_roles_only_and_ignores_other_namespaces(
    tmp_path: Path, actions: ActionsEmulator, namespaced_install: Path
) -> None:
    """Installed as docs/install.md says for one controller per namespace (no ClusterRole, the
    watched namespaces in GHA_CONTROLLER_WATCH_NAMESPACES) and run with the Deployment's
    environment (all four reconcilers), the controller lists and watches only its own namespace
    and arc-runners: a set in another namespace gets no runner and no request, and nothing is
    refused."""
    async with KubeEmulator(tls=True) as kube:
        kubeconfig = await _install(kube, tmp_path, namespaced_install, actions)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
        _github_secret(kube, "team-b", actions)
        scale_set = actions.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        api = client.ApiClient(await kube.configuration())
        try:
            objects = Objects(api)
            # No ClusterRoleBinding: the one ClusterRole left grants only where a runner
            # namespace's RoleBinding binds it.
            cluster_roles = await objects.list(CLUSTER_ROLE, None, label_selector=PART_OF)
            assert [r["metadata"]["name"] for r in cluster_roles["items"]] == [
                "gha-controller-runner-namespace"
            ]
            assert not (await objects.list(CLUSTER_ROLE_BINDING, None, label_selector=PART_OF))[
                "items"
            ]
            deployment = await objects.get(DEPLOYMENT, SYSTEM, "gha-controller")
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            # The Deployment's environment, the downward API's namespace filled in.
            downward = {"fieldRef": {"fieldPath": "metadata.namespace"}}
            env = {
                e["name"]: e["value"]
                if "value" in e
                else {str(downward): SYSTEM}[str(e["valueFrom"])]
                for e in container["env"]
            }
            assert env["GHA_CONTROLLER_WATCH_NAMESPACES"] == f"{SYSTEM},{RUNNERS}"
            assert env["CONTROLLER_MANAGER_POD_NAMESPACE"] == SYSTEM
            await objects.create(EPHEMERAL_RUNNER_SET, "team-b", _runner_set(actions, scale_set.id))
            async with _controller(kubeconfig, env=env):
                await objects.create(
                    EPHEMERAL_RUNNER_SET, RUNNERS, _runner_set(actions, scale_set.id)
                )
                await _registered_runner(objects, RUNNERS)
                ignored = await objects.get(EPHEMERAL_RUNNER_SET, "team-b", "arc")
            assert not ignored["metadata"].get("finalizers")
            assert not (await objects.list(EPHEMERAL_RUNNER, "team-b"))["items"]
        finally:
            await api.close()
        requests = kube.requests
        assert requests.count(user=IDENTITY, code=403) == 0, requests.summary()
        assert requests.count(user=IDENTITY, namespace="team-b") == 0
        lists = [r for r in requests.log if r.user == IDENTITY and r.verb in ("list", "watch")]
        assert lists
        assert {r.namespace for r in lists} == {RUNNERS, SYSTEM}
