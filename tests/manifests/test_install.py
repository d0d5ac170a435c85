"""kubectl installs the manifests on an API server (the emulator) and RBAC grants what it should.

The emulator evaluates RBAC from the stored Roles and bindings, so `kubectl auth can-i --as`
answers for the listener and controller identities exactly as a cluster would.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox.kube.emulator import KubeEmulator

MANIFESTS = Path(__file__).parents[2] / "manifests"
LISTENER = "system:serviceaccount:arc-runners:gha-listener"
CONTROLLER = "system:serviceaccount:gha-runner-scaler-system:gha-controller"


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    # TLS, because kubectl sends no bearer token over plain HTTP.
    async with KubeEmulator(tls=True) as kube:
        path = tmp_path / "kubeconfig"
        kube.write_kubeconfig(path)
        yield path


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def _apply(kubeconfig: Path, *args: str) -> None:
    code, output = await _kubectl(kubeconfig, "apply", *args)
    assert code == 0, output


async def _can_i(kubeconfig: Path, identity: str, namespace: str, verb: str, what: str) -> bool:
    """`what` is resource[/name][:subresource], e.g. `ephemeralrunnersets/my-runners:status`."""
    target, _, subresource = what.partition(":")
    args = ["auth", "can-i", verb, target, "-n", namespace, "--as", identity]
    if subresource:
        args.append(f"--subresource={subresource}")
    code, output = await _kubectl(kubeconfig, *args)
    assert output.strip() in {"yes", "no"}, output
    return code == 0


async def test_install_then_docker_run_example_apply(kubeconfig: Path) -> None:
    await _apply(kubeconfig, "-k", str(MANIFESTS))
    assert (await _kubectl(kubeconfig, "create", "namespace", "arc-runners"))[0] == 0
    await _apply(kubeconfig, "-k", str(MANIFESTS / "examples" / "docker-run"))
    code, output = await _kubectl(
        kubeconfig, "get", "ephemeralrunnersets", "-n", "arc-runners", "-o", "name"
    )
    assert (code, output.split()) == (0, ["ephemeralrunnerset.actions.github.com/my-runners"])


LISTENER_CAN = {
    ("get", "ephemeralrunners"): True,
    # The spec is the controller's: a stolen listener token cannot rewrite a runner's pod.
    ("patch", "ephemeralrunners"): False,
    ("get", "ephemeralrunners:status"): False,
    ("patch", "ephemeralrunners:status"): True,
    ("update", "ephemeralrunners:status"): False,
    ("patch", "ephemeralrunnersets/my-runners"): True,
    ("patch", "ephemeralrunnersets/another-set"): False,
    ("patch", "ephemeralrunnersets/my-runners:status"): False,
    ("get", "ephemeralrunnersets/my-runners"): False,
    ("list", "ephemeralrunners"): False,
    ("watch", "ephemeralrunners"): False,
    ("update", "ephemeralrunners"): False,
    ("delete", "ephemeralrunners"): False,
    ("create", "ephemeralrunners"): False,
    ("get", "secrets"): False,
    ("get", "pods"): False,
}


async def test_listener_service_account_can_do_exactly_its_job(kubeconfig: Path) -> None:
    await _apply(kubeconfig, "-k", str(MANIFESTS / "crds"))
    assert (await _kubectl(kubeconfig, "create", "namespace", "arc-runners"))[0] == 0
    # As the README says: `kubectl apply -n arc-runners -f manifests/listener/`.
    await _apply(kubeconfig, "-n", "arc-runners", "-f", str(MANIFESTS / "listener"))
    answers = {
        (verb, what): await _can_i(kubeconfig, LISTENER, "arc-runners", verb, what)
        for verb, what in LISTENER_CAN
    }
    assert answers == LISTENER_CAN
    assert not await _can_i(kubeconfig, LISTENER, "default", "patch", "ephemeralrunners")


CONTROLLER_CAN = {
    # Cluster-wide, only the informers' list and watch.
    ("kube-system", "get", "secrets"): False,
    ("kube-system", "list", "secrets"): False,
    ("kube-system", "list", "pods"): True,
    ("kube-system", "create", "pods"): False,
    ("kube-system", "delete", "pods"): False,
    ("kube-system", "patch", "ephemeralrunners"): False,
    ("kube-system", "list", "ephemeralrunners"): True,
    ("kube-system", "get", "configmaps"): False,
    ("kube-system", "create", "events"): False,
    ("default", "create", "serviceaccounts"): False,
    ("default", "create", "roles"): False,
    ("default", "create", "rolebindings"): False,
    # A runner namespace with the component: what the reconcilers do there.
    ("arc-runners", "get", "secrets"): True,
    ("arc-runners", "create", "secrets"): True,
    ("arc-runners", "update", "secrets"): True,
    ("arc-runners", "watch", "secrets"): False,
    ("arc-runners", "patch", "secrets"): True,
    ("arc-runners", "create", "ephemeralrunners"): True,
    ("arc-runners", "delete", "ephemeralrunners"): True,
    ("arc-runners", "update", "ephemeralrunners"): False,
    ("arc-runners", "patch", "ephemeralrunnersets:status"): True,
    ("arc-runners", "update", "ephemeralrunnersets:status"): False,
    ("arc-runners", "update", "ephemeralrunnersets:finalizers"): True,
    ("arc-runners", "create", "ephemeralrunnersets"): True,
    ("arc-runners", "create", "pods"): True,
    ("arc-runners", "delete", "pods"): True,
    ("arc-runners", "patch", "pods"): True,
    ("arc-runners", "get", "configmaps"): True,
    ("arc-runners", "create", "events"): True,
    ("arc-runners", "create", "roles"): True,
    ("arc-runners", "escalate", "roles"): False,
    ("arc-runners", "bind", "roles"): False,
    ("arc-runners", "create", "serviceaccounts"): False,
    ("arc-runners", "patch", "autoscalingrunnersets"): True,
    ("arc-runners", "create", "autoscalingrunnersets"): False,
    ("arc-runners", "delete", "autoscalingrunnersets"): False,
    ("arc-runners", "create", "autoscalinglisteners"): False,
    # The standby listeners' Lease: made, granted (get, update), deleted; never listed.
    ("arc-runners", "create", "leases"): True,
    ("arc-runners", "update", "leases"): True,
    ("arc-runners", "delete", "leases"): True,
    ("arc-runners", "list", "leases"): False,
    ("arc-runners", "patch", "leases"): False,
    ("gha-runner-scaler-system", "update", "leases"): True,
    ("gha-runner-scaler-system", "delete", "leases"): False,
    # The controller namespace: listeners, their pods, ServiceAccounts and Secrets.
    ("gha-runner-scaler-system", "create", "autoscalinglisteners"): True,
    ("gha-runner-scaler-system", "create", "pods"): True,
    ("gha-runner-scaler-system", "create", "secrets"): True,
    ("gha-runner-scaler-system", "create", "roles"): False,
    ("gha-runner-scaler-system", "create", "ephemeralrunners"): False,
}


async def test_controller_service_account_permissions(kubeconfig: Path) -> None:
    """The install plus the runner-namespace component for arc-runners, as the README says."""
    await _apply(kubeconfig, "-k", str(MANIFESTS))
    assert (await _kubectl(kubeconfig, "create", "namespace", "arc-runners"))[0] == 0
    await _apply(kubeconfig, "-k", str(MANIFESTS / "examples" / "runner-namespace"))
    answers = {
        (namespace, verb, what): await _can_i(kubeconfig, CONTROLLER, namespace, verb, what)
        for namespace, verb, what in CONTROLLER_CAN
    }
    assert answers == CONTROLLER_CAN
    code, output = await _kubectl(
        kubeconfig, "auth", "can-i", "get", "secrets", "--all-namespaces", "--as", CONTROLLER
    )
    assert (code, output.strip()) == (1, "no")


async def test_without_the_component_the_controller_writes_nothing_in_a_namespace(
    kubeconfig: Path,
) -> None:
    await _apply(kubeconfig, "-k", str(MANIFESTS))
    assert (await _kubectl(kubeconfig, "create", "namespace", "team-b"))[0] == 0
    for verb, what in [("create", "pods"), ("get", "secrets"), ("patch", "ephemeralrunners")]:
        assert not await _can_i(kubeconfig, CONTROLLER, "team-b", verb, what)
    assert await _can_i(kubeconfig, CONTROLLER, "team-b", "watch", "ephemeralrunners")
