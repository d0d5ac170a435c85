"""Which busy-pod annotations a runner pod needs set or removed (docs/reconcilers.md#busy-pods)."""

from __future__ import annotations

import pytest

from controller.ephemeralrunner.rules import busy_pod_annotations
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
