"""Under ARC's listener, which writes a runner's job fields without `Running`, the controller
promotes the runner (docs/reconcilers.md#arcs-listener); under this project's listener it never
writes `Running`. Through the emulators with their kubelet, the runner set's listener an
AutoscalingListener in the controller namespace (no listener reconciler runs: the object is
what the controller reads)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.kinds import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER_SET
from shared.typedefs import JSONDict
from tests.controller.conftest import LISTENER_IMAGE, Rig, RigOptions

ARC_IMAGE = "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2"
JOB = {
    "jobId": "job-1",
    "jobRequestId": 4242,
    "jobRepositoryName": "owner/repo",
    "workflowRunId": 9001,
    "jobWorkflowRef": "owner/repo/.github/workflows/ci.yaml@refs/heads/main",
    "jobDisplayName": "build",
}
"""What ARC's listener patches into a runner's status on JobStarted: the job, no phase."""


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunnerset", "ephemeralrunner"))


async def add_listener(rig: Rig, **container: Any) -> None:
    spec: JSONDict = {
        "githubConfigUrl": rig.config_url,
        "githubConfigSecret": "github-secret",
        "runnerScaleSetId": rig.scale_set_id,
        "autoscalingRunnerSetNamespace": rig.namespace,
        "autoscalingRunnerSetName": "arc",
        "ephemeralRunnerSetName": "arc",
        "maxRunners": 5,
        "minRunners": 0,
        "image": LISTENER_IMAGE,
    }
    if container:
        spec["template"] = {"spec": {"containers": [{"name": "listener", **container}]}}
    body: JSONDict = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {"name": "arc-listener", "namespace": rig.system_namespace},
        "spec": spec,
    }
    await rig.objects.create(AUTOSCALING_LISTENER, rig.system_namespace, body)


async def running_pod_runner(rig: Rig) -> str:
    await rig.create_runner_set()
    await rig.scale(1, 1)
    [runner] = await rig.registered(1)
    name: str = runner["metadata"]["name"]

    async def pod_running() -> bool:
        pod = await rig.pod(name)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

    await rig.until(pod_running, what="runner pod running")
    await rig.settle()
    return name


async def phase(rig: Rig, name: str) -> str:
    runner = await rig.runner(name)
    assert runner is not None
    return str((runner.get("status") or {}).get("phase"))


@pytest.mark.parametrize(
    "container",
    [
        {"image": ARC_IMAGE},
        # A mirror that renames ARC's image: its command says what it runs.
        {"image": "registry.example/mirror/arc-listener:0.14.2", "command": ["/ghalistener"]},
    ],
    ids=["arc-image", "renamed-mirror-with-command"],
)
async def test_arcs_listener_job_promotes_the_runner_in_one_status_patch(
    rig: Rig, container: JSONDict
) -> None:
    await add_listener(rig, **container)
    name = await running_pod_runner(rig)
    assert await phase(rig, name) == "Pending"
    rig.kube.requests.reset()
    await rig.set_status(name, **JOB)

    async def running() -> bool:
        return await phase(rig, name) == "Running"

    await rig.until(running, what="runner promoted to Running")

    async def counted() -> bool:
        runner_set = await rig.objects.get(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")
        return (runner_set.get("status") or {}).get("runningEphemeralRunners") == 1

    await rig.until(counted, what="the set counts one running runner")
    await rig.settle()
    requests = rig.controller_requests()
    # The promotion is the one runner write the job costs; the rest is the set's count.
    assert requests.get("patch ephemeralrunners/status") == 1, requests


async def test_this_projects_listener_leaves_running_to_the_listener(rig: Rig) -> None:
    """The same job fields without `Running` under this project's listener (which writes both
    in one patch, so this never happens there) are left as they are: the controller does not
    take over the listener's part."""
    await add_listener(rig)
    name = await running_pod_runner(rig)
    rig.kube.requests.reset()
    await rig.set_status(name, **JOB)
    await rig.settle(delayed=True)
    assert await phase(rig, name) == "Pending"
    assert "patch ephemeralrunners/status" not in rig.controller_requests()
