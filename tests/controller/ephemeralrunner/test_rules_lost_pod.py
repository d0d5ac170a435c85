"""A busy runner whose pod is taken with its job fails, naming the node and the cause
(docs/reconcilers.md#a-busy-runner-loses-its-pod): the rules as a table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.ephemeralrunner.rules import (
    ObservedRunner,
    PodLoss,
    Route,
    decide_from_pod,
    lost_job,
    plan_runner,
)
from controller.runners.backoff import FailurePolicy
from shared.typedefs import JSONDict

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
POLICY = FailurePolicy()
RUNNING: JSONDict = {"name": "runner", "state": {"running": {}}}


def runner(**status: object) -> JSONDict:
    return {
        "metadata": {"name": "r", "namespace": "ns", "uid": "runner-uid"},
        "status": {"phase": "Running", "runnerId": 7, **status},
    }


BUSY = runner(jobId="job-9", jobRequestId=9)
IDLE = runner(phase="Pending")


def pod(
    *,
    condition: str = "",
    deleting: bool = False,
    phase: str = "Running",
    exit_code: int | None = None,
) -> JSONDict:
    state: JSONDict = (
        {"terminated": {"exitCode": exit_code}} if exit_code is not None else {"running": {}}
    )
    status: JSONDict = {"phase": phase, "containerStatuses": [{"name": "runner", "state": state}]}
    if condition:
        status["conditions"] = [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": condition,
                "message": f"{condition} message",
            }
        ]
    meta: JSONDict = {"name": "r", "uid": "pod-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T08:00:00Z"
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("the_pod", "reason", "said"),
    [
        (pod(condition="EvictionByEvictionAPI", deleting=True), "PodEvicted", "evicted"),
        (pod(condition="TerminationByKubelet", phase="Failed", exit_code=137), "PodEvicted", ""),
        (pod(condition="PreemptionByScheduler", deleting=True), "PodEvicted", "evicted"),
        (pod(condition="DeletionByTaintManager", deleting=True), "PodDeleted", "deleted"),
        (pod(condition="DeletionByPodGC", deleting=True), "PodDeleted", "deleted"),
        (pod(deleting=True), "PodDeleted", "deleted"),
    ],
    ids=["eviction-api", "kubelet", "preempted", "taint-manager", "pod-gc", "plain-delete"],
)
def test_a_busy_runners_pod_taken_fails_it_with_node_and_cause(
    the_pod: JSONDict, reason: str, said: str
) -> None:
    outcome = decide_from_pod(BUSY, the_pod, ready=False, now=NOW, policy=POLICY, node="node-a")
    assert outcome.status["phase"] == "Failed"
    assert outcome.status["reason"] == reason
    message = outcome.status["message"]
    assert "node node-a" in message
    assert "job-9" in message
    assert said in message
    condition = PodLoss.of(the_pod).reason
    if condition:
        assert f"({condition}: {condition} message)" in message
    assert outcome.warning == (reason, message)
    assert outcome.remove_registration
    assert not outcome.delete_runner


def test_a_pod_taken_from_an_idle_runner_or_after_its_job_is_not_a_lost_job() -> None:
    taken = pod(condition="EvictionByEvictionAPI", deleting=True)
    assert decide_from_pod(IDLE, taken, ready=False, now=NOW, policy=POLICY).status.get(
        "phase"
    ) in (None, "Pending")
    # The runner said its job ended before the pod went: success, not a loss.
    done = pod(condition="EvictionByEvictionAPI", deleting=True, phase="Succeeded", exit_code=0)
    assert decide_from_pod(BUSY, done, ready=False, now=NOW, policy=POLICY).status["phase"] == (
        "Succeeded"
    )


def test_without_its_pod_the_last_state_seen_names_node_and_cause() -> None:
    loss = PodLoss.of(pod(condition="EvictionByEvictionAPI", deleting=True), node="node-a")
    seen = ObservedRunner(runner=BUSY, pod=None, now=NOW, policy=POLICY, lost_pod=loss)
    decided = plan_runner(seen)
    assert decided.route is Route.WITHOUT_POD
    assert not decided.delete_self
    assert decided.outcome is not None
    assert decided.outcome.status["reason"] == "PodEvicted"
    assert "node node-a" in decided.outcome.status["message"]
    # Never seen (a restart in between): deleted, on a node it cannot name.
    unseen = lost_job(BUSY, None)
    assert unseen.status["reason"] == "PodDeleted"
    assert "an unknown node" in unseen.status["message"]
