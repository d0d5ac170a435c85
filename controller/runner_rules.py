"""Pure decisions of the EphemeralRunner reconciler: what a runner pod's state means for the runner.

The reconciler (controller/ephemeralrunner.py) reads the runner and its pod, asks these
functions what to do, and performs the writes. Nothing here does I/O, so every rule of
arc-controllers.md 7.1 step 10, with this project's changes, is tested as a table:

* the controller publishes `Pending` and never `Running` (the listener owns `Running`);
* a runner container that exits 0 makes the runner `Succeeded` (the EphemeralRunnerSet cleans
  finished runners up under the patch-id protocol) instead of deleting it at once;
* after more than `max_pod_failures` failed pods an idle runner becomes `Failed` with a reason,
  instead of disappearing (users-peers.md P1: a visible failure reason).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.api import EphemeralRunnerPhase, is_terminal_phase
from shared.api.names import (
    MESSAGE_OUTDATED,
    REASON_OUTDATED,
    RUNNER_CONTAINER,
    RUNNER_DEPRECATED_EXIT_CODE,
)

JSONDict = dict[str, Any]

# ARC declares this reason but never writes it; here it explains a runner that ran out of pods.
REASON_TOO_MANY_POD_FAILURES = "TooManyPodFailures"

# Waiting reasons of a container that will not start without a change or luck: a pod stuck on
# one of them past the start timeout is a failed pod; on a permanent one it is failed at once.
STUCK_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "RegistryUnavailable",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
PERMANENT_WAITING_REASONS = frozenset({"InvalidImageName", "ErrImageNeverPull"})


@dataclass(frozen=True, slots=True)
class FailurePolicy:
    """How often an idle runner's pod may fail, and how long to wait before the next pod.

    The defaults are ARC's: at most 5 recorded failures and the backoff 0, 5, 10, 20, 40, 80 s
    (doubling from `first_backoff`, capped at `max_backoff`).
    """

    max_pod_failures: int = 5
    first_backoff: timedelta = timedelta(seconds=5)
    max_backoff: timedelta = timedelta(seconds=80)
    start_timeout: timedelta | None = timedelta(minutes=10)
    """How long the runner container may wait on its image or its configuration before the pod
    counts as failed (ARC waits forever, users-peers.md P1); None waits forever."""

    def backoff(self, failures: int) -> timedelta:
        """The wait before the next pod after `failures` recorded failures."""
        if failures <= 0:
            return timedelta(0)
        doubled: timedelta = self.first_backoff * (2 ** min(failures - 1, 30))
        return min(doubled, self.max_backoff)


def is_terminal(runner: JSONDict) -> bool:
    return is_terminal_phase(status_of(runner).get("phase"))


def status_of(obj: JSONDict) -> JSONDict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def has_job(runner: JSONDict) -> bool:
    return bool(status_of(runner).get("jobId"))


def status_int(obj: JSONDict, key: str) -> int:
    """An integer status field; 0 when it is absent or not an integer."""
    value = status_of(obj).get(key)
    return value if isinstance(value, int) else 0


def runner_id(runner: JSONDict) -> int:
    return status_int(runner, "runnerId")


def is_deleting(obj: JSONDict) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def last_failure(runner: JSONDict) -> datetime | None:
    failures = status_of(runner).get("failures") or {}
    times = [parse_time(v) for v in failures.values() if isinstance(v, str)]
    return max(times) if times else None


def failure_count(runner: JSONDict) -> int:
    return len(status_of(runner).get("failures") or {})


def retry_delay(runner: JSONDict, *, now: datetime, policy: FailurePolicy) -> timedelta | None:
    """How long to wait before creating the next pod, or None when it may be created now."""
    last = last_failure(runner)
    if last is None:
        return None
    due = last + policy.backoff(failure_count(runner))
    return due - now if now < due else None


def runner_container_status(pod: JSONDict) -> JSONDict | None:
    for status in status_of(pod).get("containerStatuses") or []:
        if status.get("name") == RUNNER_CONTAINER:
            return dict(status)
    return None


def _terminated(container_status: JSONDict | None) -> JSONDict | None:
    if container_status is None:
        return None
    terminated = (container_status.get("state") or {}).get("terminated")
    return terminated if isinstance(terminated, dict) else None


def _init_container_failed(pod: JSONDict) -> JSONDict | None:
    for status in status_of(pod).get("initContainerStatuses") or []:
        terminated = _terminated(status)
        if terminated is not None and terminated.get("exitCode", 0) != 0:
            return terminated
    return None


class PodState(enum.Enum):
    """What the runner pod says about the runner."""

    NO_RUNNER_STATUS = "no-runner-status"  # nothing to publish yet
    STARTED = "started"  # runner container waiting or running
    SUCCEEDED = "succeeded"
    OUTDATED = "outdated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PodReading:
    state: PodState
    reason: str = ""
    message: str = ""


def read_pod(pod: JSONDict) -> PodReading:
    """Classify a runner pod (arc-controllers.md 7.1 step 10, first match wins)."""
    status = status_of(pod)
    pod_reason = str(status.get("reason") or "")
    pod_message = str(status.get("message") or "")
    runner = runner_container_status(pod)
    terminated = _terminated(runner)
    if status.get("phase") == "Failed":
        if terminated is None:
            return PodReading(PodState.FAILED, pod_reason, pod_message)
        return _from_exit(terminated, pod_reason, pod_message)
    init_failure = _init_container_failed(pod)
    if init_failure is not None:
        return PodReading(
            PodState.FAILED,
            str(init_failure.get("reason") or pod_reason or "InitContainerFailed"),
            str(init_failure.get("message") or pod_message),
        )
    if runner is None:
        return PodReading(PodState.NO_RUNNER_STATUS)
    if terminated is None:
        waiting = (runner.get("state") or {}).get("waiting") or {}
        return PodReading(
            PodState.STARTED,
            str(waiting.get("reason") or pod_reason),
            str(waiting.get("message") or pod_message),
        )
    return _from_exit(terminated, pod_reason, pod_message)


def _from_exit(terminated: JSONDict, pod_reason: str, pod_message: str) -> PodReading:
    code = terminated.get("exitCode", 0)
    reason = str(terminated.get("reason") or pod_reason)
    message = str(terminated.get("message") or pod_message)
    if code == 0:
        return PodReading(PodState.SUCCEEDED, reason, message)
    if code == RUNNER_DEPRECATED_EXIT_CODE:
        return PodReading(PodState.OUTDATED, REASON_OUTDATED, MESSAGE_OUTDATED)
    return PodReading(PodState.FAILED, reason or f"ExitCode{code}", message)


@dataclass(frozen=True, slots=True)
class PodOutcome:
    """What the reconciler must do after reading the pod; `status` is merged into the status."""

    status: JSONDict = field(default_factory=dict)
    delete_pod: bool = False
    delete_runner: bool = False
    remove_registration: bool = False
    warning: tuple[str, str] | None = None
    recheck_after: timedelta | None = None
    """Look at the pod again after this long even without an event (a start timeout runs)."""


def decide_from_pod(
    runner: JSONDict,
    pod: JSONDict,
    *,
    ready: bool,
    now: datetime,
    policy: FailurePolicy,
) -> PodOutcome:
    """The writes that bring a live, non-terminal runner in line with its pod.

    `ready` is `pod_ready(pod)`, passed in so readiness has one definition (design.md 2).
    """
    reading = read_pod(pod)
    current = status_of(runner)
    if reading.state is PodState.NO_RUNNER_STATUS:
        return PodOutcome()
    if reading.state is PodState.STARTED:
        stuck = _stuck_for(pod, reading=reading, now=now, policy=policy)
        if stuck is None or stuck > timedelta(0):
            return PodOutcome(
                status=_started_status(current, ready=ready, reading=reading),
                recheck_after=stuck,
            )
    if reading.state is PodState.SUCCEEDED:
        return PodOutcome(
            status={
                "phase": EphemeralRunnerPhase.SUCCEEDED.value,
                "ready": False,
                "reason": reading.reason,
                "message": reading.message,
            }
        )
    if reading.state is PodState.OUTDATED:
        return PodOutcome(
            status={
                "phase": EphemeralRunnerPhase.OUTDATED.value,
                "ready": False,
                "reason": REASON_OUTDATED,
                "message": MESSAGE_OUTDATED,
            },
            remove_registration=True,
        )
    if has_job(runner):
        # The job on this runner is lost either way; a new pod would re-use a consumed JIT config.
        return PodOutcome(delete_runner=True)
    return _count_failure(runner, pod, reading=reading, now=now, policy=policy)


def _stuck_for(
    pod: JSONDict, *, reading: PodReading, now: datetime, policy: FailurePolicy
) -> timedelta | None:
    """None when the runner container is not stuck; else how long until the pod counts as
    failed (zero or less: now)."""
    if reading.reason in PERMANENT_WAITING_REASONS:
        return timedelta(0)
    if reading.reason not in STUCK_WAITING_REASONS or policy.start_timeout is None:
        return None
    created = pod.get("metadata", {}).get("creationTimestamp")
    if not created:
        return None
    return parse_time(str(created)) + policy.start_timeout - now


def _started_status(current: JSONDict, *, ready: bool, reading: PodReading) -> JSONDict:
    desired: JSONDict = {}
    if not current.get("phase"):
        desired["phase"] = EphemeralRunnerPhase.PENDING.value
    if bool(current.get("ready")) != ready or desired:
        desired.update(ready=ready, reason=reading.reason, message=reading.message)
    return desired


def _count_failure(
    runner: JSONDict,
    pod: JSONDict,
    *,
    reading: PodReading,
    now: datetime,
    policy: FailurePolicy,
) -> PodOutcome:
    failures = dict(status_of(runner).get("failures") or {})
    uid = str(pod.get("metadata", {}).get("uid", ""))
    if uid in failures:
        # Already counted; the pod delete may not have reached the cache yet.
        return PodOutcome(delete_pod=not is_deleting(pod))
    failures[uid] = format_time(now)
    status: JSONDict = {
        "failures": {uid: failures[uid]},
        "ready": False,
        "reason": reading.reason,
        "message": reading.message,
    }
    if len(failures) <= policy.max_pod_failures:
        return PodOutcome(status=status, delete_pod=not is_deleting(pod))
    message = f"The runner pod failed {len(failures)} times; last failure: {reading.reason}"
    if reading.message:
        message = f"{message}: {reading.message}"
    status.update(
        phase=EphemeralRunnerPhase.FAILED.value,
        reason=REASON_TOO_MANY_POD_FAILURES,
        message=message,
    )
    return PodOutcome(
        status=status,
        delete_pod=not is_deleting(pod),
        remove_registration=True,
        warning=(REASON_TOO_MANY_POD_FAILURES, message),
    )


def too_many_failures(runner: JSONDict, policy: FailurePolicy) -> bool:
    return failure_count(runner) > policy.max_pod_failures
