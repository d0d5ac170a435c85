"""Which status patch a JobStarted makes, for every runner state.

The rules: docs/listener.md, "JobStarted".
"""

from __future__ import annotations

from typing import Any

import pytest

from listener.job_started import job_fields, owned_by, status_patch
from shared.actions.models import JobStarted

JOB = JobStarted(
    runner_request_id=101,
    owner_name="octo-org",
    repository_name="hello",
    job_id="job-7",
    workflow_run_id=55,
    job_workflow_ref="octo-org/hello/.github/workflows/ci.yml@refs/heads/main",
    job_display_name="build",
    runner_name="set-runner-abc",
)
FIELDS: dict[str, Any] = {
    "jobRequestId": 101,
    "jobRepositoryName": "octo-org/hello",
    "jobId": "job-7",
    "workflowRunId": 55,
    "jobWorkflowRef": "octo-org/hello/.github/workflows/ci.yml@refs/heads/main",
    "jobDisplayName": "build",
}


def runner(phase: str | None, *, deleting: bool = False, **status: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "set-runner-abc", "resourceVersion": "42"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if phase is not None:
        status["phase"] = phase
    return {"metadata": metadata, "status": status}


def test_job_fields_are_arcs() -> None:
    assert job_fields(JOB) == FIELDS


@pytest.mark.parametrize("phase", [None, "", "Pending", "Running"])
def test_live_runner_is_promoted_with_the_job_fields(phase: str | None) -> None:
    patch = status_patch(runner(phase), FIELDS)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "42"}
    expected = {**FIELDS, "phase": "Running"} if phase != "Running" else FIELDS
    assert patch["status"] == expected


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Outdated"])
def test_terminal_runner_gets_the_job_fields_only(phase: str) -> None:
    patch = status_patch(runner(phase), FIELDS)
    assert patch is not None
    assert patch["status"] == FIELDS


@pytest.mark.parametrize("phase", ["Pending", "Running", "Failed"])
def test_deleting_runner_gets_the_job_fields_only(phase: str) -> None:
    patch = status_patch(runner(phase, deleting=True), FIELDS)
    assert patch is not None
    assert "phase" not in patch["status"]


@pytest.mark.parametrize("phase", ["Running", "Succeeded"])
def test_redelivered_job_started_patches_nothing(phase: str) -> None:
    assert status_patch(runner(phase, **FIELDS), FIELDS) is None


OWNER = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "EphemeralRunnerSet",
    "name": "my-runners",
    "uid": "uid-1",
    "controller": True,
}


@pytest.mark.parametrize(
    ("references", "uid", "owned"),
    [
        ([OWNER], "uid-1", True),
        ([OWNER], None, True),
        ([OWNER], "uid-2", False),
        ([{**OWNER, "name": "other-runners"}], "uid-1", False),
        ([{**OWNER, "kind": "ReplicaSet", "apiVersion": "apps/v1"}], "uid-1", False),
        ([{**OWNER, "controller": False}], "uid-1", False),
        ([], "uid-1", False),
    ],
    ids=["ours", "uid-unknown", "earlier-set", "other-set", "other-kind", "not-controller", "none"],
)
def test_only_a_runner_this_set_controls_is_ours(
    references: list[dict[str, Any]], uid: str | None, owned: bool
) -> None:
    runner = {"metadata": {"name": "r", "ownerReferences": references}}
    assert owned_by(runner, runner_set="my-runners", uid=uid) is owned
