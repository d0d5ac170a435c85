"""Busy runner pods carry the node autoscalers' do-not-disrupt annotations, idle ones do not
(docs/reconcilers.md#busy-pods), through the emulators with their kubelet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.ephemeralrunner.metrics import PROTECTION
from controller.ephemeralrunner.rules import BUSY_POD_ANNOTATIONS
from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.api.names import LABEL_SCALE_SET_NAMESPACE
from shared.typedefs import JSONDict
from tests.controller.conftest import FAST, Rig, RigOptions
from tests.controller.runtime.conftest import sample_value

KARPENTER = "karpenter.sh/do-not-disrupt"
CLUSTER_AUTOSCALER = "cluster-autoscaler.kubernetes.io/safe-to-evict"


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",))


def busy_annotations(pod: JSONDict | None) -> dict[str, str]:
    assert pod is not None
    found: dict[str, str] = pod["metadata"].get("annotations") or {}
    return {key: value for key, value in found.items() if key in BUSY_POD_ANNOTATIONS}


async def ready_runner(rig: Rig, template: JSONDict | None = None) -> str:
    runner = await rig.create_runner(template=template)
    name: str = runner["metadata"]["name"]

    async def pod_running() -> bool:
        pod = await rig.pod(name)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

    await rig.until(pod_running, what="runner pod running")
    await rig.settle()
    return name


async def test_the_annotations_follow_the_runners_phase(rig: Rig) -> None:
    name = await ready_runner(rig)
    assert busy_annotations(await rig.pod(name)) == {}
    patches_before = rig.controller_requests().get("patch pods", 0)

    await rig.set_status(name, phase="Running", jobId="job-1", jobRequestId=7)

    async def protected() -> bool:
        return busy_annotations(await rig.pod(name)) == {
            KARPENTER: "true",
            CLUSTER_AUTOSCALER: "false",
        }

    await rig.until(protected, what="busy pod annotated")
    await rig.settle()
    # Idle again (no job on the runner): the pod may be drained like any other.
    await rig.set_status(name, phase="Pending", jobId=None, jobRequestId=None)

    async def unprotected() -> bool:
        return busy_annotations(await rig.pod(name)) == {}

    await rig.until(unprotected, what="idle pod unannotated")
    await rig.settle()
    assert rig.controller_requests().get("patch pods", 0) - patches_before == 2


async def test_a_template_annotation_is_the_users(rig: Rig) -> None:
    """A user who pins do-not-disrupt on every runner pod keeps it on idle pods too."""
    template: JSONDict = {
        "metadata": {"annotations": {KARPENTER: "true"}},
        "spec": {"containers": [{"name": "runner", "image": "runner:latest"}]},
    }
    runner = await rig.create_runner(template=template["spec"], metadata=template["metadata"])
    name = runner["metadata"]["name"]

    async def pod_running() -> bool:
        pod = await rig.pod(name)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

    await rig.until(pod_running, what="runner pod running")
    await rig.set_status(name, phase="Running", jobId="job-1", jobRequestId=7)

    async def protected() -> bool:
        return busy_annotations(await rig.pod(name)) == {
            KARPENTER: "true",
            CLUSTER_AUTOSCALER: "false",
        }

    await rig.until(protected, what="busy pod annotated")
    await rig.set_status(name, phase="Pending", jobId=None, jobRequestId=None)

    async def only_the_users() -> bool:
        return busy_annotations(await rig.pod(name)) == {KARPENTER: "true"}

    await rig.until(only_the_users, what="the controller's annotation removed")


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunner",),
            settings=FAST.model_copy(update={"protect_busy_pods": False}),
        )
    ],
)
async def test_turned_off_no_pod_is_patched(rig: Rig) -> None:
    name = await ready_runner(rig)
    await rig.set_status(name, phase="Running", jobId="job-1", jobRequestId=7)

    async def seen_running() -> bool:
        return rig.reconciles("ephemeralrunner") > 0 and await rig.runner(name) is not None

    await rig.until(seen_running, what="runner reconciled")
    await rig.settle()
    assert busy_annotations(await rig.pod(name)) == {}
    assert "patch pods" not in rig.controller_requests()


async def test_the_protection_is_timed_from_the_listeners_job_started(rig: Rig) -> None:
    """`gha_controller_busy_pod_protection_seconds` (docs/reconcilers.md#metrics): one sample
    per busy pod protected, the seconds since the listener's `jobStarted` moment, in the
    runner's own namespace whatever its labels say; a moment that does not parse (the runner is
    its namespace's to write) is no sample and no error, and neither is a runner without the
    listener's timeline (ARC's listener writes the job fields alone)."""
    timed, garbled, arcs = await ready_runner(rig), await ready_runner(rig), await ready_runner(rig)
    forged = {"metadata": {"labels": {LABEL_SCALE_SET_NAMESPACE: "another-team"}}}
    await rig.objects.patch(EPHEMERAL_RUNNER, rig.namespace, timed, forged)
    three_seconds_ago = tl.format_moment(datetime.now(UTC) - timedelta(seconds=3))
    await rig.set_status(
        timed, phase="Running", jobId="job-1", timeline={tl.JOB_STARTED: three_seconds_ago}
    )
    await rig.set_status(
        garbled, phase="Running", jobId="job-2", timeline={tl.JOB_STARTED: "yesterday"}
    )
    await rig.set_status(arcs, phase="Running", jobId="job-3", jobRequestId=3)
    for name in (timed, garbled, arcs):

        async def protected(name: str = name) -> bool:
            return busy_annotations(await rig.pod(name)) != {}

        await rig.until(protected, what=f"{name}'s pod protected")
    await rig.settle()
    text = rig.metrics()
    assert sample_value(text, f"{PROTECTION}_count", name=timed, namespace=rig.namespace) == 1
    assert sample_value(text, f"{PROTECTION}_count", namespace="another-team") == 0
    assert sample_value(text, f"{PROTECTION}_sum", name=timed) >= 3.0
    assert sample_value(text, f"{PROTECTION}_count", name=garbled) == 0
    assert sample_value(text, f"{PROTECTION}_count", name=arcs) == 0
