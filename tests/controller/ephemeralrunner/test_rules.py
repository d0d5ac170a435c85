"""The EphemeralRunner's pod rules, with this project's changes
(docs/reconcilers.md#ephemeralrunner), and which registration failures fail a runner at once
(docs/reconcilers.md#registration-failures)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.ephemeralrunner.rules import (
    ObservedRunner,
    PodState,
    Route,
    awaits_promotion,
    decide_from_pod,
    plan_runner,
    read_pod,
    registration_failure,
    registration_timed_out,
    retry_delay,
)
from controller.github.clients import GitHubConfigError
from controller.runners.backoff import FailurePolicy
from shared.actions.errors import (
    ActionsConnectionError,
    ActionsError,
    ActionsServerError,
    AuthenticationFailed,
    InvalidConfigURL,
    ScaleSetNotFound,
    TokenExpired,
    UnexpectedResponse,
)
from shared.kube.views import format_time
from shared.typedefs import JSONDict

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
POLICY = FailurePolicy()


def pod(
    *,
    phase: str = "Running",
    runner: JSONDict | None = None,
    init: JSONDict | None = None,
    reason: str = "",
    uid: str = "pod-uid-1",
) -> JSONDict:
    status: JSONDict = {"phase": phase}
    if reason:
        status["reason"] = reason
        status["message"] = f"{reason} message"
    if runner is not None:
        status["containerStatuses"] = [
            {"name": "sidecar", "state": {"running": {}}},
            {"name": "runner", "state": runner},
        ]
    if init is not None:
        status["initContainerStatuses"] = [{"name": "setup", "state": init}]
    return {"metadata": {"name": "r", "uid": uid}, "status": status}


def exited(code: int) -> JSONDict:
    return {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}


def runner(**status: Any) -> JSONDict:
    return {"metadata": {"name": "r"}, "status": status}


RUNNING: JSONDict = {"running": {"startedAt": "2026-12-02T11:00:00Z"}}
WAITING: JSONDict = {"waiting": {"reason": "ContainerCreating"}}


@pytest.mark.parametrize(
    ("the_pod", "state"),
    [
        (pod(phase="Pending"), PodState.NO_RUNNER_STATUS),
        (pod(phase="Running"), PodState.NO_RUNNER_STATUS),
        (pod(phase="Pending", runner=WAITING), PodState.STARTED),
        (pod(runner=RUNNING), PodState.STARTED),
        (pod(phase="Succeeded", runner=RUNNING), PodState.STARTED),
        (pod(phase="Succeeded", runner=exited(0)), PodState.SUCCEEDED),
        (pod(runner=exited(0)), PodState.SUCCEEDED),
        (pod(phase="Failed", runner=exited(0)), PodState.SUCCEEDED),
        (pod(runner=exited(7)), PodState.OUTDATED),
        (pod(phase="Failed", runner=exited(7)), PodState.OUTDATED),
        (pod(runner=exited(1)), PodState.FAILED),
        (pod(phase="Failed", runner=exited(137)), PodState.FAILED),
        (pod(phase="Failed"), PodState.FAILED),
        (pod(phase="Failed", reason="Evicted", runner={}), PodState.FAILED),
        (pod(phase="Failed", reason="OutOfpods"), PodState.FAILED),
        (pod(phase="Pending", init=exited(1)), PodState.FAILED),
        (pod(phase="Pending", init=exited(0), runner=WAITING), PodState.STARTED),
    ],
)
def test_read_pod(the_pod: JSONDict, state: PodState) -> None:
    assert read_pod(the_pod).state is state


@pytest.mark.parametrize(
    ("current", "ready", "expected"),
    [
        ({}, False, {"phase": "Pending", "ready": False}),
        ({}, True, {"phase": "Pending", "ready": True}),
        ({"phase": "Pending", "ready": False}, True, {"ready": True}),
        ({"phase": "Pending", "ready": True}, True, {}),
        ({"phase": "Pending", "ready": True}, False, {"ready": False}),
        # The listener owns Running: the controller never promotes nor demotes it.
        ({"phase": "Running", "ready": True, "jobId": "j"}, True, {}),
        ({"phase": "Running", "ready": True, "jobId": "j"}, False, {"ready": False}),
    ],
)
def test_started_pod_publishes_pending_never_running(
    current: JSONDict, ready: bool, expected: JSONDict
) -> None:
    outcome = decide_from_pod(
        runner(**current), pod(runner=RUNNING), ready=ready, now=NOW, policy=POLICY
    )
    assert {k: outcome.status[k] for k in ("phase", "ready") if k in outcome.status} == expected
    assert (outcome.delete_pod, outcome.delete_runner, outcome.remove_registration) == (
        False,
        False,
        False,
    )


def test_pod_without_runner_status_changes_nothing() -> None:
    outcome = decide_from_pod(runner(), pod(), ready=False, now=NOW, policy=POLICY)
    assert outcome.status == {}


@pytest.mark.parametrize("job", ["", "job-1"])
def test_runner_exit_zero_is_succeeded(job: str) -> None:
    outcome = decide_from_pod(
        runner(phase="Running", jobId=job),
        pod(runner=exited(0)),
        ready=False,
        now=NOW,
        policy=POLICY,
    )
    assert outcome.status["phase"] == "Succeeded"
    assert not outcome.delete_runner


def test_exit_seven_is_outdated_and_removed_from_the_service() -> None:
    outcome = decide_from_pod(
        runner(phase="Pending"), pod(runner=exited(7)), ready=False, now=NOW, policy=POLICY
    )
    assert outcome.status["phase"] == "Outdated"
    assert outcome.status["reason"] == "Outdated"
    assert outcome.status["message"] == "Runner is deprecated"
    assert outcome.remove_registration


@pytest.mark.parametrize(
    "the_pod",
    [
        pod(runner=exited(1)),
        pod(phase="Failed"),
        pod(phase="Pending", init=exited(1)),
        pod(phase="Failed", reason="Evicted"),
    ],
)
def test_busy_runner_whose_pod_fails_is_deleted_not_restarted(the_pod: JSONDict) -> None:
    outcome = decide_from_pod(
        runner(phase="Running", jobId="job-1"), the_pod, ready=False, now=NOW, policy=POLICY
    )
    assert outcome.delete_runner
    assert not outcome.delete_pod
    assert outcome.status == {}


@pytest.mark.parametrize(
    "the_pod",
    [
        pod(runner=exited(1)),
        pod(phase="Failed"),
        pod(phase="Pending", init=exited(1)),
        pod(phase="Failed", reason="Evicted"),
        pod(phase="Failed", reason="OutOfpods"),
    ],
)
def test_idle_runner_failure_is_counted_and_pod_deleted(the_pod: JSONDict) -> None:
    outcome = decide_from_pod(runner(phase="Pending"), the_pod, ready=False, now=NOW, policy=POLICY)
    assert outcome.delete_pod
    assert outcome.status["failures"] == {"pod-uid-1": "2026-12-02T12:00:00Z"}
    assert "phase" not in outcome.status
    assert not outcome.delete_runner


def test_same_pod_failure_is_counted_once() -> None:
    counted = runner(phase="Pending", failures={"pod-uid-1": "2026-12-02T11:59:00Z"})
    outcome = decide_from_pod(counted, pod(runner=exited(1)), ready=False, now=NOW, policy=POLICY)
    assert outcome.status == {}
    assert outcome.delete_pod


def test_failure_beyond_the_maximum_marks_failed_with_reason() -> None:
    failures = {f"old-{i}": "2026-12-02T11:00:00Z" for i in range(5)}
    outcome = decide_from_pod(
        runner(phase="Pending", failures=failures),
        pod(phase="Failed", reason="Evicted"),
        ready=False,
        now=NOW,
        policy=POLICY,
    )
    assert outcome.status["phase"] == "Failed"
    assert outcome.status["reason"] == "TooManyPodFailures"
    assert "Evicted" in outcome.status["message"]
    assert outcome.remove_registration
    assert outcome.warning is not None


@pytest.mark.parametrize(
    ("failures", "seconds"), [(0, 0), (1, 5), (2, 10), (3, 20), (4, 40), (5, 80), (9, 80)]
)
def test_backoff_is_arcs_table(failures: int, seconds: int) -> None:
    assert POLICY.backoff(failures) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("failures", "last_ago", "expected"),
    [
        (0, 0, None),
        (1, 0, timedelta(seconds=5)),
        (1, 5, None),
        (3, 15, timedelta(seconds=5)),
        (3, 25, None),
    ],
)
def test_retry_delay_waits_out_the_backoff(
    failures: int, last_ago: int, expected: timedelta | None
) -> None:
    at = (NOW - timedelta(seconds=last_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    older = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recorded = {f"uid-{i}": older for i in range(failures - 1)}
    if failures:
        recorded["last"] = at
    assert retry_delay(runner(failures=recorded), now=NOW, policy=POLICY) == expected


def waiting(reason: str, *, created_ago: int) -> JSONDict:
    the_pod = pod(phase="Pending", runner={"waiting": {"reason": reason, "message": "why"}})
    created = NOW - timedelta(seconds=created_ago)
    the_pod["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    return the_pod


@pytest.mark.parametrize(
    ("reason", "created_ago", "failed", "recheck"),
    [
        ("ContainerCreating", 3600, False, None),
        ("ImagePullBackOff", 60, False, timedelta(seconds=540)),
        ("ErrImagePull", 600, True, None),
        ("CreateContainerConfigError", 900, True, None),
        ("InvalidImageName", 0, True, None),
    ],
)
def test_pod_stuck_before_start_fails_after_the_start_timeout(
    reason: str, created_ago: int, failed: bool, recheck: timedelta | None
) -> None:
    outcome = decide_from_pod(
        runner(phase="Pending"),
        waiting(reason, created_ago=created_ago),
        ready=False,
        now=NOW,
        policy=POLICY,
    )
    assert ("failures" in outcome.status) is failed
    assert outcome.delete_pod is failed
    assert outcome.recheck_after == recheck
    if failed:
        assert outcome.status["reason"] == reason


def test_start_timeout_can_be_disabled() -> None:
    outcome = decide_from_pod(
        runner(phase="Pending"),
        waiting("ImagePullBackOff", created_ago=86400),
        ready=False,
        now=NOW,
        policy=FailurePolicy(start_timeout=None),
    )
    assert outcome.status.get("failures") is None
    assert outcome.recheck_after is None


@pytest.mark.parametrize(
    ("error", "reason", "permanent"),
    [
        (ScaleSetNotFound("404", status=404), "ScaleSetNotFound", True),
        (AuthenticationFailed("401", status=401), "GitHubCredentialsRefused", True),
        (ActionsError("403 from the service", status=403), "GitHubCredentialsRefused", True),
        (TokenExpired("401 after a renewal", status=401), "GitHubCredentialsRefused", True),
        (
            GitHubConfigError("GitHubConfigSecretNotFound", "secret s not found"),
            "GitHubConfigSecretNotFound",
            True,
        ),
        (InvalidConfigURL("not a config URL"), "InvalidGitHubConfig", True),
        (ActionsServerError("503", status=503), "RegistrationFailed", False),
        (ActionsConnectionError("refused"), "RegistrationFailed", False),
        (UnexpectedResponse("no body", status=200), "RegistrationFailed", False),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_registration_failures_permanent_or_retried(
    error: Exception, reason: str, permanent: bool
) -> None:
    failure = registration_failure(error, scale_set_id=7)
    assert (failure.reason, failure.permanent) == (reason, permanent)


@pytest.mark.parametrize(
    ("age", "timeout", "timed_out"),
    [
        (timedelta(minutes=9), timedelta(minutes=10), False),
        (timedelta(minutes=10), timedelta(minutes=10), True),
        (timedelta(days=3), None, False),
    ],
)
def test_registration_timed_out_from_creation(
    age: timedelta, timeout: timedelta | None, timed_out: bool
) -> None:
    runner = {"metadata": {"creationTimestamp": format_time(NOW - age)}}
    assert registration_timed_out(runner, now=NOW, timeout=timeout) is timed_out


def registered(**status: Any) -> JSONDict:
    """A runner with a runner id, as a pass finds it once registered."""
    return runner(runnerId=7, **status)


def observed(
    the_runner: JSONDict,
    the_pod: JSONDict | None = None,
    *,
    written_phase: str | None = None,
    registered_here: bool = False,
    pod_created_ago: float | None = None,
    arc_listener: bool = False,
) -> ObservedRunner:
    return ObservedRunner(
        runner=the_runner,
        pod=the_pod,
        now=NOW,
        policy=POLICY,
        written_phase=written_phase,
        registered=registered_here,
        pod_created_ago=pod_created_ago,
        listener_skips_running=arc_listener,
    )


DELETING = {"metadata": {"name": "r", "deletionTimestamp": "2026-12-02T11:00:00Z"}}
FIVE_FAILURES = {f"uid-{i}": "2026-12-02T10:00:00Z" for i in range(6)}
JUST_FAILED = {"uid-0": format_time(NOW)}


@pytest.mark.parametrize(
    ("case", "seen", "route", "looks_at_pod"),
    [
        ("being deleted", observed(DELETING), Route.FINALIZE, False),
        ("failed", observed(registered(phase="Failed")), Route.FINISHED, False),
        # This process wrote `Failed`; the cache still shows `Pending`.
        (
            "failed here",
            observed(registered(phase="Pending"), written_phase="Failed"),
            Route.FINISHED,
            False,
        ),
        ("not registered", observed(runner()), Route.REGISTER, True),
        ("registered here", observed(runner(), registered_here=True), Route.WITHOUT_POD, True),
        (
            "pods failed too often",
            observed(registered(failures=FIVE_FAILURES)),
            Route.TOO_MANY_FAILURES,
            True,
        ),
        (
            "its pod not cached yet",
            observed(registered(), pod_created_ago=1.0),
            Route.AWAIT_POD,
            True,
        ),
        (
            "its pod long gone",
            observed(registered(), pod_created_ago=60.0),
            Route.WITHOUT_POD,
            True,
        ),
        ("with a pod", observed(registered(), pod(runner=RUNNING)), Route.POD, True),
    ],
)
def test_the_route_of_a_pass_and_whether_a_pod_gone_wakes_it(
    case: str, seen: ObservedRunner, route: Route, looks_at_pod: bool
) -> None:
    decided = plan_runner(seen)
    assert (decided.route, decided.waits_for_pod) == (route, looks_at_pod), case


def test_without_a_pod_the_runner_goes_waits_or_gets_one() -> None:
    # A busy runner fails, saying why (docs/reconcilers.md#a-busy-runner-loses-its-pod); it
    # used to be deleted without a word.
    busy = plan_runner(observed(registered(jobId="j")))
    assert (busy.delete_self, busy.describe()) == (
        False,
        "without a pod: its pod went with its job",
    )
    assert busy.outcome is not None
    assert busy.outcome.status["phase"] == "Failed"
    waiting = plan_runner(observed(registered(failures=JUST_FAILED)))
    assert (waiting.create_pod, waiting.retry_after) == (False, timedelta(seconds=5))
    assert plan_runner(observed(registered())).create_pod


def test_a_pod_decides_and_a_finished_job_deletes_the_runner_at_once() -> None:
    done = plan_runner(observed(registered(), pod(runner=exited(0))))
    assert (done.route, done.delete_self, done.describe()) == (
        Route.POD,
        True,
        "pod: its job is done",
    )
    running = plan_runner(observed(registered(), pod(runner=RUNNING)))
    assert (running.delete_self, running.describe()) == (False, "")
    assert running.outcome is not None


def test_too_many_failures_says_how_many() -> None:
    decided = plan_runner(observed(registered(failures=FIVE_FAILURES)))
    assert decided.describe() == "too many pod failures: the runner pod failed 6 times"


ARC_JOB = {"jobId": "j", "jobRequestId": 4242}
"""The job fields ARC's listener writes, without a phase (docs/reconcilers.md#arcs-listener)."""


@pytest.mark.parametrize(
    ("case", "the_runner", "arc_listener", "phase"),
    [
        ("ARC's listener's job", registered(phase="Pending", **ARC_JOB), True, "Running"),
        ("a job request alone", registered(phase="Pending", jobRequestId=1), True, "Running"),
        ("no phase yet", registered(**ARC_JOB), True, "Running"),
        ("no job", registered(phase="Pending"), True, None),
        ("Running already", registered(phase="Running", **ARC_JOB), True, None),
        # This project's listener writes `Running` with the job: never the controller's part.
        ("this project's listener", registered(phase="Pending", **ARC_JOB), False, None),
    ],
)
def test_arcs_listener_job_is_promoted_to_running(
    case: str, the_runner: JSONDict, arc_listener: bool, phase: str | None
) -> None:
    decided = plan_runner(observed(the_runner, pod(runner=RUNNING), arc_listener=arc_listener))
    assert decided.outcome is not None
    assert decided.outcome.status.get("phase") == phase, case


@pytest.mark.parametrize(
    ("case", "the_runner", "route"),
    [
        ("being deleted", {**DELETING, "status": {"phase": "Pending", **ARC_JOB}}, Route.FINALIZE),
        ("failed", registered(phase="Failed", **ARC_JOB), Route.FINISHED),
        ("outdated", registered(phase="Outdated", **ARC_JOB), Route.FINISHED),
    ],
)
def test_a_promotion_never_lays_over_a_terminal_phase_or_a_deletion(
    case: str, the_runner: JSONDict, route: Route
) -> None:
    decided = plan_runner(observed(the_runner, pod(runner=RUNNING), arc_listener=True))
    assert (decided.route, decided.outcome) == (route, None), case
    assert not awaits_promotion(the_runner)


def test_a_promotion_waits_for_a_runner_container_that_started() -> None:
    """A pod failed under a busy runner deletes it, as without ARC's listener."""
    decided = plan_runner(
        observed(registered(phase="Pending", **ARC_JOB), pod(runner=exited(1)), arc_listener=True)
    )
    assert decided.delete_self
    assert decided.outcome is not None
    assert "phase" not in decided.outcome.status
