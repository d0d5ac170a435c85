"""A busy runner whose pod is deleted or evicted anyway (a forced drain, node loss) ends `Failed`
with the node and the cause, in its status and a Warning Event, and its set replaces it
(docs/reconcilers.md#a-busy-runner-loses-its-pod). The emulator's kubelet runs the pod on its
node; the `DisruptionTarget` condition is written as admin, as the API server writes it itself
(no user's identity does) before it deletes an evicted pod."""

from __future__ import annotations

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import EVENT, POD
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions

NODE = "sandbox-node"


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",))


async def busy_runner(rig: Rig) -> str:
    created = await rig.create_runner()
    name: str = created["metadata"]["name"]

    async def pod_running() -> bool:
        pod = await rig.pod(name)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

    await rig.until(pod_running, what="runner pod running")
    runner = await rig.runner(name)
    assert runner is not None
    await rig.job_started(runner)

    async def protected() -> bool:
        pod = await rig.pod(name)
        return "karpenter.sh/do-not-disrupt" in ((pod or {})["metadata"].get("annotations") or {})

    # The node is named from the answer to the busy-pod patch (the cache keeps no pod spec).
    await rig.until(protected, what="busy pod protected")
    return name


async def disrupt(rig: Rig, name: str, reason: str) -> None:
    pod = await rig.pod(name)
    assert pod is not None
    conditions = [
        *pod["status"].get("conditions", []),
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "message": f"{reason}: on purpose",
        },
    ]
    await rig.pod_status(name, {"conditions": conditions})


async def failed(rig: Rig, name: str) -> JSONDict:
    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        status = (runner or {}).get("status") or {}
        return runner if status.get("phase") == "Failed" else None

    result: JSONDict = await rig.until(probe, what=f"runner {name} failed")
    return result


async def warnings(rig: Rig, name: str) -> list[JSONDict]:
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    return [e for e in events if e["type"] == "Warning" and e["involvedObject"]["name"] == name]


@pytest.mark.parametrize(
    ("condition", "grace", "reason", "cause"),
    [
        ("EvictionByEvictionAPI", 0, "PodEvicted", "was evicted"),
        ("EvictionByEvictionAPI", None, "PodEvicted", "was evicted"),
        ("DeletionByTaintManager", 0, "PodDeleted", "was deleted"),
        ("DeletionByPodGC", 0, "PodDeleted", "was deleted"),
        ("", 0, "PodDeleted", "was deleted"),
        ("", None, "PodDeleted", "was deleted"),
    ],
    ids=[
        "forced-eviction-gone-at-once",
        "eviction-seen-terminating",
        "node-lost",
        "node-gone",
        "deleted-at-once",
        "deleted-seen-terminating",
    ],
)
async def test_a_busy_runner_whose_pod_is_taken_fails_naming_node_and_cause(
    rig: Rig, condition: str, grace: int | None, reason: str, cause: str
) -> None:
    name = await busy_runner(rig)
    if condition:
        await disrupt(rig, name, condition)
    # Grace 0: the pod is gone at once, known only from its delete event; else the pass sees it
    # terminating.
    await rig.objects.delete(POD, rig.namespace, name, grace_period_seconds=grace)
    runner = await failed(rig, name)
    status = runner["status"]
    assert status["reason"] == reason
    assert f"on node {NODE} {cause} during job job-1" in status["message"]
    if condition:
        assert f"({condition}: {condition}: on purpose)" in status["message"]
    [warning] = await warnings(rig, name)
    assert (warning["reason"], warning["message"]) == (reason, status["message"])
    # No second pod: its JIT config was used by the job.
    await rig.settle()
    assert await rig.pod(name) is None or (await rig.pod(name) or {})["metadata"].get(
        "deletionTimestamp"
    )


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=False)]
)
async def test_a_kubelet_eviction_fails_the_busy_runner(rig: Rig) -> None:
    """Node pressure: the kubelet fails the pod and marks it, without deleting it."""
    created = await rig.create_runner()
    name = created["metadata"]["name"]
    await rig.registered(1)
    await rig.until(lambda: rig.pod(name), what="pod")
    runner = await rig.runner(name)
    assert runner is not None
    await rig.job_started(runner)
    await rig.pod_status(
        name,
        {
            "phase": "Failed",
            "reason": "Evicted",
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "TerminationByKubelet",
                    "message": "The node was low on resource: memory.",
                }
            ],
        },
    )
    runner = await failed(rig, name)
    assert runner["status"]["reason"] == "PodEvicted"
    assert (
        "(TerminationByKubelet: The node was low on resource: memory.)"
        in (runner["status"]["message"])
    )


@pytest.mark.parametrize("rig_options", [RigOptions()])
async def test_the_set_refills_the_slot_of_a_runner_that_lost_its_pod(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    [runner] = await rig.registered(1)
    name = runner["metadata"]["name"]
    await rig.until(lambda: rig.pod(name), what="pod")
    await rig.job_started(runner)
    await rig.objects.delete(POD, rig.namespace, name, grace_period_seconds=0)

    async def replaced() -> bool:
        runners = await rig.live_runners()
        return [r["metadata"]["name"] for r in runners] != [name] and len(runners) == 1

    await rig.until(replaced, what="the failed runner replaced")
    assert not await rig.exists(EPHEMERAL_RUNNER, rig.namespace, name) or (
        (await rig.runner(name) or {}).get("status", {}).get("phase") == "Failed"
    )


async def test_an_idle_runner_evicted_gets_a_new_pod(rig: Rig) -> None:
    """A drain takes idle runners at once: the runner stays, unfailed, with a new pod."""
    created = await rig.create_runner()
    name = created["metadata"]["name"]
    old = await rig.until(lambda: rig.pod(name), what="pod")
    await disrupt(rig, name, "EvictionByEvictionAPI")
    await rig.objects.delete(POD, rig.namespace, name, grace_period_seconds=0)

    async def new_pod() -> JSONDict | None:
        pod = await rig.pod(name)
        return pod if pod and pod["metadata"]["uid"] != old["metadata"]["uid"] else None

    await rig.until(new_pod, what="a new pod")
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["status"].get("phase") != "Failed"
    assert not runner["status"].get("failures")
    assert await warnings(rig, name) == []
