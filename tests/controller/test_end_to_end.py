"""Both controllers with the kubelet running the Actions emulator's simulated runners: runners
that keep crashing (docs/reconcilers.md#failed-runners), a deprecated runner version
(docs/reconcilers.md#outdated-runners), a set applied with kubectl and other tools' annotations
(docs/reconcilers.md#objects), and the registration with the `gha-controller` process."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from controller.app import install_reconcilers
from controller.ephemeralrunner.predicates import POD_TO_ER
from controller.ephemeralrunnerset.predicates import ER_TO_ERS
from controller.runtime import Manager
from shared.kube.objects import EVENT
from shared.typedefs import JSONDict
from tests.controller.conftest import FAST, TEST_USER, Rig, RigOptions, metric

CRASHING = RigOptions(
    simulated_runners=True,
    settings=FAST.model_copy(update={"max_pod_failures": 1}),
)


def lineage(runner: JSONDict) -> str:
    annotations = runner["metadata"].get("annotations") or {}
    return str(annotations.get("gha-runner-scaler/failed-runner-replacements", "0"))


@pytest.mark.parametrize("rig_options", [CRASHING])
async def test_crashing_runners_are_failed_reported_and_replaced_with_backoff(rig: Rig) -> None:
    rig.gh.faults.crash_runners(1)
    await rig.create_runner_set(replicas=1, patch_id=1)

    # The counter goes up after the replacement is created and its event written, so a pass
    # may show the second replacement before counting it.
    async def replaced_twice() -> list[JSONDict] | None:
        live = await rig.live_runners()
        counted = metric(rig.metrics(), "gha_controller_failed_ephemeral_runner_replacements_total")
        return live if live and lineage(live[0]) == "2" and counted >= 2 else None

    await rig.until(replaced_twice, what="a second replacement", within=30.0)
    text = rig.metrics()
    assert metric(text, "gha_controller_failed_ephemeral_runner_replacements_total") >= 2
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    reasons = {e["reason"] for e in events}
    assert {"TooManyPodFailures", "ReplacingFailedRunner"} <= reasons
    failed_messages = [e["message"] for e in events if e["reason"] == "TooManyPodFailures"]
    assert all("failed 2 times" in m for m in failed_messages)

    rig.gh.faults.crash_runners(None)

    # A pod is Ready as soon as its container runs, which the simulated runner's connection
    # may trail, and a runner started while crashes were on is Ready until it exits: only an
    # online one proves the crashes are over.
    async def healthy_and_online() -> JSONDict | None:
        for runner in await rig.live_runners():
            status = runner.get("status") or {}
            registered = rig.gh.state.runners.get(status.get("runnerId") or 0)
            if (
                status.get("ready")
                and status.get("phase") == "Pending"
                and registered is not None
                and registered.online
            ):
                return runner
        return None

    await rig.until(healthy_and_online, what="a healthy replacement online", within=20.0)


@pytest.mark.parametrize("rig_options", [RigOptions(simulated_runners=True)])
async def test_deprecated_runner_version_parks_the_set_until_the_revision_moves(
    rig: Rig,
) -> None:
    rig.gh.deprecate_runner_version()
    await rig.create_runner_set(replicas=2, patch_id=1)

    async def outdated() -> bool:
        status: JSONDict = (await rig.runner_set()).get("status") or {}
        return status.get("phase") == "Outdated"

    await rig.until(outdated, what="set Outdated")
    await rig.until(lambda: no_runners(rig), what="outdated runners cleaned up")
    await rig.scale(3, 2)
    await rig.settle()
    assert await rig.runners() == []
    assert (await rig.runner_set())["status"]["phase"] == "Outdated"

    rig.gh.deprecate_runner_version(False)
    await rig.patch_spec(
        {
            "actionableRevision": 1,
            "ephemeralRunnerSpec": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "runner", "image": "runner:v2"}],
                }
            },
        }
    )
    await rig.scale(3, 3)
    runners = await rig.registered(3)
    assert {r["spec"]["spec"]["containers"][0]["image"] for r in runners} == {"runner:v2"}
    status = (await rig.runner_set())["status"]
    assert (status["phase"], status["appliedActionableRevision"]) == ("Running", 1)


async def no_runners(rig: Rig) -> bool:
    return not await rig.runners()


# Annotations deployment tools put on the set they apply; none describes a runner or a pod.
TOOL_ANNOTATIONS = {
    "meta.helm.sh/release-name": "runners",
    "meta.helm.sh/release-namespace": "arc-runners",
    "helm.sh/resource-policy": "keep",
    "argocd.argoproj.io/tracking-id": "runners:actions.github.com/EphemeralRunnerSet:ns/arc",
    "argocd.argoproj.io/sync-wave": "1",
    "config.kubernetes.io/origin": "path: runners/set.yaml",
    "internal.config.kubernetes.io/path": "set.yaml",
    "kustomize.config.k8s.io/id": "kind: EphemeralRunnerSet",
    "kustomize.toolkit.fluxcd.io/ssa": "Merge",
    "objectset.rio.cattle.io/id": "fleet-runners",
    "pulumi.com/patchForce": "true",
}


async def kubectl(kubeconfig: Path, *args: str) -> str:
    kubectl_bin = shutil.which("kubectl")
    assert kubectl_bin is not None, "kubectl is not installed"
    process = await asyncio.create_subprocess_exec(
        kubectl_bin,
        "--kubeconfig",
        str(kubeconfig),
        *args,
        env={**os.environ, "HOME": str(kubeconfig.parent)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    return output.decode()


@pytest.mark.parametrize("rig_options", [RigOptions(tls=True)])
async def test_tool_annotations_of_a_kubectl_applied_set_stay_off_runners_and_pods(
    rig: Rig, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    rig.kube.write_kubeconfig(kubeconfig, token=rig.kube.user_token(TEST_USER, ["system:masters"]))
    runner_spec = rig.runner_spec(
        metadata={"annotations": {"kubectl.kubernetes.io/default-container": "runner"}}
    )
    manifest = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": "arc",
            "namespace": rig.namespace,
            "annotations": {"team": "platform", **TOOL_ANNOTATIONS},
        },
        "spec": {"replicas": 1, "patchID": 1, "ephemeralRunnerSpec": runner_spec},
    }
    (tmp_path / "set.json").write_text(json.dumps(manifest))
    await kubectl(kubeconfig, "apply", "-f", str(tmp_path / "set.json"))
    applied = (await rig.runner_set())["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in applied

    [runner] = await rig.registered(1)
    name = runner["metadata"]["name"]
    pod = await rig.until(lambda: rig.pod(name), what="the runner's pod")
    on_runner = runner["metadata"]["annotations"]
    on_pod = pod["metadata"]["annotations"]
    for key in ("kubectl.kubernetes.io/last-applied-configuration", *TOOL_ANNOTATIONS):
        assert key not in on_runner
        assert key not in on_pod
    assert on_runner["team"] == on_pod["team"] == "platform"
    assert on_runner["actions.github.com/patch-id"] == "1"
    # The pod template's own annotations are the user's word for the pod, kubectl's included.
    assert on_pod["kubectl.kubernetes.io/default-container"] == "runner"


async def test_both_reconcilers_are_installed_in_gha_controller() -> None:
    # The composition root calls each reconciler's setup explicitly; what it installs is asserted
    # below.
    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"
    api = client.ApiClient(configuration)
    try:
        manager = Manager(api=api)
        install_reconcilers(manager)
        by_name = {c.name: c for c in manager.controllers}
        assert by_name["ephemeralrunner"].owns[0].predicate is POD_TO_ER
        assert by_name["ephemeralrunnerset"].owns[0].predicate is ER_TO_ERS
    finally:
        await api.close()
