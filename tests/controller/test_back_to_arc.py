"""Going back to ARC (docs/install.md#going-back-to-arc), per released line: the objects this
controller leaves, the documented commands, then a released ARC's rules (`arc_released.
ArcController`) and a `helm uninstall`. Issue 41: ARC removes only its own finalizer from runner
sets, and an AutoscalingRunnerSet's deletion waits for every set it owns; before `--back`, the
runner sets this controller had finalized stayed `Terminating`, and so did their scale sets."""

from __future__ import annotations

import asyncio
import base64
import os
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from controller.runnernamespace import PROTECTION_FINALIZER, ROLE_NAME
from controller.runners.objects import is_own_digest
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.api.names import FINALIZER_EPHEMERAL_RUNNER_SET
from shared.kube.errors import Forbidden
from shared.kube.objects import POD, ROLE_BINDING, Kind, Objects
from shared.typedefs import JSONDict
from tests.controller import arc_released
from tests.controller.autoscaling import ALL, RUNNER_TEMPLATE
from tests.controller.conftest import CONTROLLER_NAMESPACE, install_rbac, open_rig

RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
INSTALLED = [
    (Kind("Namespace", "namespaces", namespaced=False), None, CONTROLLER_NAMESPACE),
    (Kind("ClusterRole", "clusterroles", RBAC, namespaced=False), None, "gha-controller"),
    (
        Kind("ClusterRole", "clusterroles", RBAC, namespaced=False),
        None,
        "gha-controller-runner-namespace",
    ),
    (
        Kind("ClusterRoleBinding", "clusterrolebindings", RBAC, namespaced=False),
        None,
        "gha-controller",
    ),
    (
        Kind(
            "ValidatingAdmissionPolicy", "validatingadmissionpolicies", ADMISSION, namespaced=False
        ),
        None,
        "gha-listener-scales-only",
    ),
]
"""What step 3 removes, a sample: by then none of it is there, not even Terminating."""

ROOT = Path(__file__).resolve().parents[2]
GHA_CONTROLLER = ROOT / ".venv" / "bin" / "gha-controller"
ADOPTED = "arc-runner-set"
"""A scale set ARC made, with its runner set, that this controller adopted."""
FRESH = "new-runner-set"
"""A scale set installed with ARC's chart while this controller ran: its runner set is this
controller's own."""


def documented_commands(step: int) -> list[list[str]]:
    """The commands of a step of docs/install.md#going-back-to-arc, each as written."""
    section = (ROOT / "docs" / "install.md").read_text().split("## Going back to ARC", 1)[1]
    text = section.split(f"\n{step}. ", 1)[1].split(f"\n{step + 1}. ", 1)[0]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#", 1)[0]) for line in block.strip().splitlines()]


@dataclass
class Left:
    kube: KubeEmulator
    objects: Objects
    """The admin's: `helm`, and the user's checks."""
    arc: arc_released.ArcController
    """ARC's controller, as its ServiceAccount."""
    namespace: str
    kubeconfig: Path
    system_namespace: str


ARC_SERVICE_ACCOUNT = "arc-gha-rs-controller"
ARC_RBAC: list[JSONDict] = [
    {"apiVersion": "v1", "kind": "ServiceAccount",
     "metadata": {"name": ARC_SERVICE_ACCOUNT, "namespace": arc_released.ARC_NAMESPACE}},
    {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "arc-controller"},
     "rules": [{"apiGroups": ["actions.github.com"], "resources": ["*"], "verbs": ["*"]}]},
    {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "arc-controller"},
     "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "arc-controller"},
     "subjects": [{"kind": "ServiceAccount", "name": ARC_SERVICE_ACCOUNT,
                   "namespace": arc_released.ARC_NAMESPACE}]},
]  # fmt: skip
"""ARC's controller's identity: a ServiceAccount of its namespace, with every verb on ARC's kinds
(its chart's ClusterRole grants those it uses), so that only admission can refuse it."""


@pytest.fixture
async def kube(actions: ActionsEmulator) -> AsyncIterator[KubeEmulator]:
    # TLS, because kubectl sends no bearer token over plain HTTP.
    async with KubeEmulator(
        tls=True, container_runtime=actions.runtime, restart_backoff=0.01
    ) as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


def chart_set(
    line: arc_released.ChartLine, name: str, namespace: str, url: str, sid: int
) -> JSONDict:
    ars = arc_released.autoscaling_runner_set(
        line,
        name=name,
        namespace=namespace,
        config_url=url,
        secret="github-secret",
        scale_set_id=sid,
        template=RUNNER_TEMPLATE,
    )
    ars["spec"]["minRunners"] = 1
    return ars


@pytest.fixture(params=sorted(arc_released.LINES))
async def left(
    request: pytest.FixtureRequest,
    kube: KubeEmulator,
    objects: Objects,
    namespace: str,
    actions: ActionsEmulator,
    tmp_path: Path,
) -> AsyncIterator[Left]:
    """ARC's set adopted and a new one made, each with a runner, by this controller (all four
    reconcilers, as its ServiceAccount); then this controller stopped."""
    line = arc_released.LINES[request.param]
    kubeconfig = tmp_path / "kubeconfig"
    kube.write_kubeconfig(kubeconfig)
    install_rbac(kube, namespace, cluster_role=True)
    code, _, err = await run(
        kubeconfig, ["kubectl", "apply", "-k", str(ROOT / "manifests" / "admission")]
    )
    assert code == 0, err
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": arc_released.ARC_NAMESPACE}})  # fmt: skip
    token = base64.b64encode(actions.add_pat().encode()).decode()
    kube.apply({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "github-secret", "namespace": namespace},
                "data": {"github_token": token}})  # fmt: skip
    url = actions.config_url("owner", "repo")
    scale_set = actions.state.create_scale_set(
        name=ADOPTED, runner_group_id=1, labels=[{"name": ADOPTED}], runner_setting={}
    )
    ars = kube.apply(chart_set(line, ADOPTED, namespace, url, scale_set.id))
    kube.apply(arc_released.ephemeral_runner_set(ars))
    # `helm install` of ARC's chart under this controller: ARC's controller never saw it.
    fresh = chart_set(line, FRESH, namespace, url, 0)
    del fresh["metadata"]["annotations"]["runner-scale-set-id"]
    del fresh["metadata"]["finalizers"]

    async with open_rig(
        ALL, namespace=namespace, actions=actions, kube=kube, scale_set_id=scale_set.id
    ) as rig:
        await rig.objects.create(AUTOSCALING_RUNNER_SET, namespace, fresh)

        async def ours() -> bool:
            sets = (await objects.list(EPHEMERAL_RUNNER_SET, namespace))["items"]
            runners = (await objects.list(EPHEMERAL_RUNNER, namespace))["items"]
            listeners = (await objects.list(AUTOSCALING_LISTENER, rig.system_namespace))["items"]
            return (
                len(sets) == 2
                and all(
                    FINALIZER_EPHEMERAL_RUNNER_SET in s["metadata"].get("finalizers", [])
                    and is_own_digest(s["metadata"]["annotations"][arc_released.RUNNER_SPEC_HASH])
                    for s in sets
                )
                and len([r for r in runners if (r.get("status") or {}).get("runnerId")]) == 2
                and len(listeners) == 2
            )

        async def adopted() -> list[str] | None:
            sets = (await objects.list(EPHEMERAL_RUNNER_SET, namespace))["items"]
            names = [s["metadata"]["name"] for s in sets]
            return names if len(names) == 2 else None

        for name in await rig.until(adopted, what="both runner sets"):
            await rig.scale(1, 1, name=name)
        await rig.until(ours, what="both sets run by this controller, a runner each")
        system_namespace = rig.system_namespace
    for doc in ARC_RBAC:
        kube.apply(doc)
    token = kube.service_account_token(arc_released.ARC_NAMESPACE, ARC_SERVICE_ACCOUNT)
    api = client.ApiClient(await kube.configuration(token=token))
    try:
        arc = arc_released.ArcController(Objects(api, timeout=5.0), namespace)
        yield Left(kube, objects, arc, namespace, kubeconfig, system_namespace)
    finally:
        await api.close()


async def run(kubeconfig: Path, argv: list[str]) -> tuple[int, list[str], str]:
    """`gha-controller` (this checkout's) or `kubectl`, with KUBECONFIG."""
    program = {"gha-controller": str(GHA_CONTROLLER), "kubectl": "kubectl"}[argv[0]]
    process = await asyncio.create_subprocess_exec(
        program,
        *argv[1:],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines(), err.decode()


async def everything(left: Left) -> list[JSONDict]:
    found: list[JSONDict] = []
    for kind in (AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET, EPHEMERAL_RUNNER, ROLE_BINDING):
        found += (await left.objects.list(kind, left.namespace))["items"]
    return found


def terminating(objs: list[JSONDict]) -> list[str]:
    return [
        f"{o['kind']} {o['metadata']['name']} {o['metadata'].get('finalizers')}"
        for o in objs
        if o["metadata"].get("deletionTimestamp")
    ]


async def uninstall(left: Left) -> None:
    """`helm uninstall` of both releases, with ARC's rules run until they change nothing."""
    for name in (ADOPTED, FRESH):
        await left.objects.delete(AUTOSCALING_RUNNER_SET, left.namespace, name)
    await left.arc.settle()


async def test_the_documented_steps_hand_every_set_to_arc_and_nothing_stays_terminating(
    left: Left,
) -> None:
    dry_run, apply = documented_commands(2)
    assert apply == [*dry_run, "--apply"]
    before = await everything(left)
    code, out, err = await run(left.kubeconfig, dry_run)
    assert (code, err) == (0, "")
    assert out[-1] == "dry run: nothing changed; run again with --apply to make these changes"
    sets = sorted(s["metadata"]["name"] for s in before if s["kind"] == "EphemeralRunnerSet")
    for name in sets:
        assert (
            f"would replace finalizer {FINALIZER_EPHEMERAL_RUNNER_SET} with "
            f"{arc_released.FINALIZER_ERS_LEGACY} on ephemeralrunnerset {left.namespace}/{name}"
        ) in out
    assert await everything(left) == before

    code, out, err = await run(left.kubeconfig, apply)
    assert (code, err) == (0, "")
    # This controller's listeners went with their pods: no session is held against ARC's.
    assert not (await left.objects.list(AUTOSCALING_LISTENER, left.system_namespace))["items"]
    pods = (await left.objects.list(POD, left.system_namespace))["items"]
    assert not [p for p in pods if p["metadata"].get("ownerReferences")]
    binding = await left.objects.get(ROLE_BINDING, left.namespace, ROLE_NAME)
    assert PROTECTION_FINALIZER not in (binding["metadata"].get("finalizers") or [])
    code, out, _ = await run(left.kubeconfig, apply)
    assert (code, out) == (0, ["nothing of this controller's to hand back"])

    # Step 3: this controller's install removed, but for the CRDs; nothing of it stays.
    for argv in documented_commands(3):
        argv = [left.namespace if a == "arc-runners" else a for a in argv]
        if argv[:3] == ["kubectl", "delete", "-k"]:
            argv[3] = str(ROOT / argv[3])
        code, _, err = await run(left.kubeconfig, argv)
        assert code == 0, (argv, err)
    assert not (await left.objects.list(ROLE_BINDING, left.namespace))["items"] or not [
        b
        for b in (await left.objects.list(ROLE_BINDING, left.namespace))["items"]
        if b["metadata"]["name"] == ROLE_NAME
    ]

    arc = left.arc
    await arc.settle()
    # ARC replaced both sets (this controller's digest is not ARC's), and the old ones went
    # with their runners.
    runner_sets = (await left.objects.list(EPHEMERAL_RUNNER_SET, left.namespace))["items"]
    assert sorted(s["metadata"]["name"] for s in runner_sets) == sorted(arc.created)
    assert len(arc.created) == 2
    assert not terminating(await everything(left))

    await uninstall(left)
    assert await everything(left) == []


async def test_without_the_hand_back_arc_leaves_the_sets_terminating_until_it_runs(
    left: Left,
) -> None:
    """The issue as it was: ARC's rules over this controller's objects as it leaves them (the
    admission policy removed, so that only the finalizers are in question)."""
    admission = ["kubectl", "delete", "-k", str(ROOT / "manifests" / "admission")]
    assert (await run(left.kubeconfig, admission))[0] == 0
    await left.arc.settle()
    await uninstall(left)
    await left.objects.delete(ROLE_BINDING, left.namespace, ROLE_NAME)
    stuck = terminating(await everything(left))
    assert any(s.startswith(f"AutoscalingRunnerSet {ADOPTED} ") for s in stuck), stuck
    assert any(s.startswith(f"AutoscalingRunnerSet {FRESH} ") for s in stuck), stuck
    assert len([s for s in stuck if s.startswith("EphemeralRunnerSet ")]) == 2, stuck

    # The way out the docs give: ARC stopped, step 2 run, ARC started again.
    _, apply = documented_commands(2)
    code, _, err = await run(left.kubeconfig, apply)
    assert (code, err) == (0, "")
    await left.arc.settle()
    assert await everything(left) == []


async def test_with_the_admission_policy_left_arc_is_refused_and_a_set_stays_terminating(
    left: Left,
) -> None:
    """Why step 3 removes `gha-listener-scales-only` before ARC starts: it lets no
    ServiceAccount but this controller's write a runner set's finalizers, ARC's included."""
    _, apply = documented_commands(2)
    code, _, err = await run(left.kubeconfig, apply)
    assert (code, err) == (0, "")
    with pytest.raises(Forbidden, match="finalizers of an EphemeralRunnerSet"):
        await left.arc.settle()
    stuck = terminating(await everything(left))
    assert [s for s in stuck if s.startswith("EphemeralRunnerSet ")], stuck
