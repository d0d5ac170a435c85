"""Which busy-pod annotations a runner pod needs set or removed (docs/reconcilers.md#busy-pods)."""

from __future__ import annotations

import pytest

from controller.ephemeralrunner.rules import busy_pod_annotations, busy_pod_label, busy_pod_patch
from controller.runners.busy import LABEL_RUNNER_BUSY
from shared.typedefs import JSONDict

KARPENTER = "karpenter.sh/do-not-disrupt"
AUTOSCALER = "cluster-autoscaler.kubernetes.io/safe-to-evict"
BOTH = {KARPENTER: "true", AUTOSCALER: "false"}


def runner(phase: str | None, template: dict[str, str] | None = None) -> JSONDict:
    """`Running` as the listener writes it, with the job: busy is having a job and not being
    done (shared.api.views.is_busy; the table of cases is tests/shared/api/test_busy.py)."""
    spec: JSONDict = {"metadata": {"annotations": template}} if template else {}
    status: JSONDict = {"phase": phase} if phase else {}
    if phase == "Running":
        status |= {"jobId": "6d5c", "jobRequestId": 42}
    return {"spec": spec, "status": status}


def pod(annotations: dict[str, str]) -> JSONDict:
    return {"metadata": {"name": "p", "annotations": annotations}}


@pytest.mark.parametrize(
    ("phase", "template", "present", "changes"),
    [
        ("Running", None, {}, BOTH),
        ("Running", None, {**BOTH, "other": "x"}, {}),
        ("Running", None, {KARPENTER: "false"}, BOTH),
        ("Pending", None, {}, {}),
        (None, None, {}, {}),
        ("Pending", None, {**BOTH, "other": "x"}, {KARPENTER: None, AUTOSCALER: None}),
        ("Running", {KARPENTER: "true"}, {KARPENTER: "true"}, {AUTOSCALER: "false"}),
        ("Pending", {KARPENTER: "true"}, {**BOTH}, {AUTOSCALER: None}),
        ("Pending", {AUTOSCALER: "true"}, {AUTOSCALER: "true"}, {}),
        # Its pod is deleted next: no patch to take the annotations off.
        ("Succeeded", None, {**BOTH}, {}),
        ("Failed", None, {**BOTH}, {}),
    ],
    ids=[
        "busy-gets-both",
        "busy-already-has-both",
        "busy-corrects-a-value",
        "idle-has-none",
        "new-runner-has-none",
        "idle-loses-both-keeps-others",
        "template-key-is-the-users",
        "template-key-kept-when-idle",
        "template-value-never-changed",
        "finished-keeps-them",
        "failed-keeps-them",
    ],
)
def test_busy_pod_annotations(
    phase: str | None,
    template: dict[str, str] | None,
    present: dict[str, str],
    changes: dict[str, str | None],
) -> None:
    assert busy_pod_annotations(runner(phase, template), pod(present)) == changes


SET = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunnerSet"}


def owned(
    phase: str | None, *, owner: JSONDict | None = None, labels: JSONDict | None = None
) -> JSONDict:
    obj = runner(phase)
    ref = owner if owner is not None else {**SET, "name": "s", "uid": "set-uid", "controller": True}
    obj["metadata"] = {"ownerReferences": [ref]}
    if labels:
        obj["spec"]["metadata"] = {"labels": labels}
    return obj


def labelled(value: str | None) -> JSONDict:
    labels = {LABEL_RUNNER_BUSY: value} if value else {}
    return {"metadata": {"name": "p", "annotations": {}, "labels": labels}}


@pytest.mark.parametrize(
    ("the_runner", "the_pod", "label"),
    [
        (owned("Running"), labelled(None), {LABEL_RUNNER_BUSY: "set-uid"}),
        (owned("Running"), labelled("set-uid"), {}),
        # Another set's uid (a forged or stale value) is corrected to the runner's own set.
        (owned("Running"), labelled("other-uid"), {LABEL_RUNNER_BUSY: "set-uid"}),
        (owned("Pending"), labelled("set-uid"), {LABEL_RUNNER_BUSY: None}),
        (owned("Pending"), labelled(None), {}),
        # Its pod is deleted next: it keeps the label (a terminal pod is evictable anyway).
        (owned("Succeeded"), labelled("set-uid"), {}),
        # No set, no budget: nothing to select it.
        (
            owned("Running", owner={"kind": "Other", "uid": "x", "controller": True}),
            labelled(None),
            {},
        ),
        (owned("Running", labels={LABEL_RUNNER_BUSY: "mine"}), labelled("mine"), {}),
    ],
    ids=[
        "busy-gets-it",
        "busy-has-it",
        "busy-wrong-set",
        "idle-loses-it",
        "idle-has-none",
        "finished-keeps-it",
        "no-set",
        "template-key-is-the-users",
    ],
)
def test_busy_pod_label(the_runner: JSONDict, the_pod: JSONDict, label: JSONDict) -> None:
    assert busy_pod_label(the_runner, the_pod) == label


def test_label_and_annotations_go_in_one_patch() -> None:
    assert busy_pod_patch(owned("Running"), labelled(None)) == {
        "annotations": BOTH,
        "labels": {LABEL_RUNNER_BUSY: "set-uid"},
    }
    idle_again = labelled("set-uid")
    idle_again["metadata"]["annotations"] = dict(BOTH)
    assert busy_pod_patch(owned("Pending"), idle_again) == {
        "annotations": {KARPENTER: None, AUTOSCALER: None},
        "labels": {LABEL_RUNNER_BUSY: None},
    }
    assert busy_pod_patch(owned("Pending"), labelled(None)) == {}
