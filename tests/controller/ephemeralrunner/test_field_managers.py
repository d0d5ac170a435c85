"""Who owns an EphemeralRunner's `status.phase` over its life, as the API server records it in
managedFields from each process's User-Agent (docs/listener.md#kubernetes-requests): the
controller while Pending, the listener once it promotes the runner to Running, the controller
again when the runner is Outdated."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.trace import NoOpTracer

from controller.app import COMPONENT
from listener.app import PROGRAM
from listener.job_started import status_patch
from listener.kube import RunnerSetClient
from shared.kube.http import HttpApi, from_kubeconfig, user_agent
from shared.kube.objects import Objects
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions
from tests.controller.ephemeralrunner.test_reconciler import exited, one_runner, phase


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",), kubelet=False)


def phase_owner(runner: JSONDict) -> tuple[str, str]:
    """The manager and subresource of the managedFields entry that owns status.phase."""
    [owner] = [
        (entry["manager"], entry.get("subresource", ""))
        for entry in runner["metadata"].get("managedFields") or []
        if "f:phase" in entry["fieldsV1"].get("f:status", {})
    ]
    return owner


async def test_status_phase_moves_between_the_controller_and_the_listener(
    rig: Rig, tmp_path: Path
) -> None:
    name, _ = await one_runner(rig)
    pending = await phase(rig, name, "Pending")
    assert phase_owner(pending) == (COMPONENT, "status")

    # The listener's JobStarted patch, sent the way the listener sends it.
    kubeconfig = tmp_path / "kubeconfig"
    rig.kube.write_kubeconfig(kubeconfig)
    async with HttpApi(from_kubeconfig(str(kubeconfig)), user_agent=user_agent(PROGRAM)) as api:
        listener = RunnerSetClient(
            Objects(api, timeout=5.0),
            namespace=rig.namespace,
            runner_set="arc",
            tracer=NoOpTracer(),
        )
        patch = status_patch(pending, {"jobId": "job-1", "jobRequestId": 4242})
        assert patch is not None
        running = await listener.patch_runner_status(name, patch)
    assert running["status"]["phase"] == "Running"
    assert phase_owner(running) == (PROGRAM, "status")

    # A runner that exits 0 is deleted without a status write (docs/reconcilers.md#a-runner-
    # that-succeeded); one that exits 7 is `Outdated`, written by the controller again.
    await rig.pod_status(name, exited(7))
    outdated = await phase(rig, name, "Outdated")
    assert phase_owner(outdated) == (COMPONENT, "status")
