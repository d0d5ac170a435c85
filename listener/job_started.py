"""JobStarted: record the job on its EphemeralRunner and promote the runner to Running.

The listener owns `Running` (docs/listener.md, "JobStarted"): it is the only writer of that
phase, and writes it only to a runner that is neither finished nor being deleted. The status
patch carries the resourceVersion it was decided on, so a terminal phase or a deletion written in
between makes the server answer 409 and the decision is taken again on fresh data, never
overwritten.

A `runnerName` that is not a Kubernetes name is skipped before any request (a message is the
service's bytes, and a name becomes a request path).

A runner is only touched when its controller ownerReference is this listener's
EphemeralRunnerSet: another set in the same namespace may have a runner of the same name (its
scale set on GitHub is another one), and that runner is left alone.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from listener.kube import RunnerSetClient
from shared.actions.models import JobStarted
from shared.api import EphemeralRunnerPhase
from shared.api import timeline as tl
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.api.views import is_terminal
from shared.kube.errors import Conflict, KubeError, NotFound
from shared.kube.names import name_problems
from shared.kube.views import controller_owner, is_deleting, metadata_of, status_of
from shared.typedefs import JSONDict

RUNNING = EphemeralRunnerPhase.RUNNING.value


def status_patch(runner: JSONDict, job_fields: JSONDict) -> JSONDict | None:
    """The merge patch of the runner's /status for this job, or None if it already says so.

    A redelivered JobStarted finds its fields in place and patches nothing.
    """
    status = status_of(runner)
    wanted = dict(job_fields)
    if not is_terminal(runner) and not is_deleting(runner):
        wanted["phase"] = RUNNING
    changes = {key: value for key, value in wanted.items() if status.get(key) != value}
    if not changes:
        return None
    return {
        "metadata": {"resourceVersion": metadata_of(runner)["resourceVersion"]},
        "status": changes,
    }


def owned_by(runner: JSONDict, *, runner_set: str, uid: str | None) -> bool:
    """Whether the runner's controller is the EphemeralRunnerSet `runner_set` (of `uid` when
    known: a set deleted and made again under the same name is another set)."""
    ref = controller_owner(runner)
    return (
        ref is not None
        and ref.get("apiVersion") == EPHEMERAL_RUNNER_SET.api_version
        and ref.get("kind") == EPHEMERAL_RUNNER_SET.kind
        and ref.get("name") == runner_set
        and (uid is None or ref.get("uid") == uid)
    )


def job_fields(job: JobStarted) -> JSONDict:
    """The EphemeralRunner status fields ARC's listener writes for a started job."""
    return {
        "jobRequestId": job.runner_request_id,
        "jobRepositoryName": f"{job.owner_name}/{job.repository_name}",
        "jobId": job.job_id,
        "workflowRunId": job.workflow_run_id,
        "jobWorkflowRef": job.job_workflow_ref,
        "jobDisplayName": job.job_display_name,
    }


class Outcome(enum.Enum):
    PROMOTED = "promoted to Running"
    RECORDED = "job recorded, phase kept"
    UNCHANGED = "already recorded"
    MISSING = "runner not found"
    FOREIGN = "runner not owned by this listener's EphemeralRunnerSet, left alone"
    INVALID_NAME = "runner name is not a Kubernetes name, skipped"

    @property
    def is_warning(self) -> bool:
        """Whether the outcome says the message was not applied as it asked."""
        return self in (Outcome.FOREIGN, Outcome.INVALID_NAME)


class ConflictsExhausted(KubeError):
    """The runner kept changing between the read and the patch; try the whole decision later."""

    retryable = True


def _timeline_recorded(runner: JSONDict, job: JobStarted) -> bool:
    """Whether the runner already holds this job's timeline (a redelivered JobStarted)."""
    moments = status_of(runner).get(tl.TIMELINE_FIELD) or {}
    return tl.JOB_STARTED in moments and moments.get(tl.JOB_ID) == job.job_id


async def record_job_started(
    kube: RunnerSetClient,
    job: JobStarted,
    *,
    conflict_retries: int,
    timeline_of: Callable[[JSONDict], tl.Timeline] | None = None,
) -> Outcome:
    """Apply one JobStarted to its runner: read, decide, patch guarded by resourceVersion.

    `timeline_of` gives the job's timeline from the runner read, written in the same patch.
    Transient Kubernetes errors propagate for the caller to retry; a 409 means the runner changed
    since it was read, so it is read again and the decision retaken, `conflict_retries` times.
    """
    if name_problems(job.runner_name, EPHEMERAL_RUNNER.names):
        # The message's bytes are the service's: a name that is not one never becomes a path
        # (docs/security.md#names-from-tenants).
        return Outcome.INVALID_NAME
    fields = job_fields(job)
    for _ in range(conflict_retries):
        try:
            runner = await kube.get_runner(job.runner_name)
        except NotFound:
            return Outcome.MISSING
        if not owned_by(runner, runner_set=kube.runner_set, uid=kube.runner_set_uid):
            return Outcome.FOREIGN
        wanted = fields
        if timeline_of is not None and not _timeline_recorded(runner, job):
            # In the patch made anyway: the timeline costs no request (docs/job-timeline.md).
            wanted = {**fields, tl.TIMELINE_FIELD: timeline_of(runner).moments}
        patch = status_patch(runner, wanted)
        if patch is None:
            return Outcome.UNCHANGED
        try:
            await kube.patch_runner_status(job.runner_name, patch)
        except NotFound:
            return Outcome.MISSING
        except Conflict:
            continue
        return Outcome.PROMOTED if patch["status"].get("phase") == RUNNING else Outcome.RECORDED
    raise ConflictsExhausted(
        f"EphemeralRunner {job.runner_name} changed {conflict_retries} times during JobStarted"
    )
