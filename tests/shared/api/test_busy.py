"""One answer to "is this runner busy" (shared/api/views.py), used by the runner set's scale
down and cleanup, the runner's own reconciler and the busy-pod annotations. Before, a runner
with only a `jobRequestId` was busy to its set and idle to its own reconciler, and the busy-pod
annotations followed the phase `Running` (which ARC sets on idle runners too)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.ephemeralrunner.rules import busy_pod_annotations
from shared.api.resources import EphemeralRunner
from shared.api.views import has_job, is_busy
from shared.typedefs import JSONDict


def runner(phase: str | None, *, deleting: bool = False, **status: Any) -> JSONDict:
    meta: JSONDict = {"name": "r", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {**({"phase": phase} if phase else {}), **status}}


JOB: dict[str, Any] = {"jobId": "6d5c", "jobRequestId": 42}


@pytest.mark.parametrize(
    ("obj", "job", "busy"),
    [
        (runner(None), False, False),
        (runner("Pending"), False, False),
        (runner("Running"), False, False),  # ARC's: Running as soon as the pod runs
        (runner("Running", **JOB), True, True),
        (runner("Running", jobRequestId=42), True, True),  # the job id left out
        (runner("Pending", jobRequestId=42), True, True),
        (runner("Running", deleting=True, **JOB), True, True),  # deleted, job not done yet
        (runner("Succeeded", **JOB), True, False),
        (runner("Failed", **JOB), True, False),
        (runner("Outdated", **JOB), True, False),
        (runner("Running", jobId="", jobRequestId=0), False, False),
    ],
)
def test_busy(obj: JSONDict, job: bool, busy: bool) -> None:
    assert has_job(obj) is job
    assert is_busy(obj) is busy
    pod: JSONDict = {"metadata": {"name": "r"}}
    # The pod carries the busy annotations exactly when the runner is busy.
    assert bool(busy_pod_annotations(obj, pod)) is busy


def test_the_model_agrees() -> None:
    raw = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {
            "githubConfigUrl": "https://github.com/o",
            "githubConfigSecret": "s",
            "runnerScaleSetId": 1,
            "spec": {"containers": []},
        },
        "status": {"jobRequestId": 42},
    }
    assert EphemeralRunner.model_validate(raw).has_job() is has_job(raw)
