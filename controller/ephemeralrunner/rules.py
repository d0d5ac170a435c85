"""Pure decisions of the EphemeralRunner reconciler: what a runner pod's state means for the runner.

The reconciler (`reconciler.py` here) reads the runner and its pod, asks these functions what to
do, and performs the writes. Nothing here does I/O, so every rule of ARC's pod classification
(docs/reconcilers.md#ephemeralrunner), with this project's changes, is tested as a table:

* the controller publishes `Pending`; `Running` is the listener's, except under ARC's listener,
  which writes a runner's job without it: then the controller promotes a `Pending` runner with a
  job (docs/reconcilers.md#arcs-listener);
* a runner container that exits 0 is a `Succeeded` outcome, which the reconciler carries out by
  deleting the runner and telling its set (docs/reconcilers.md#a-runner-that-succeeded);
* after more than `max_pod_failures` failed pods an idle runner becomes `Failed` with a reason,
  instead of disappearing (a visible failure reason: docs/reconcilers.md#failed-runners).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from controller.github.clients import GitHubConfigError
from controller.runners.backoff import FailurePolicy
from controller.runners.busy import LABEL_RUNNER_BUSY
from shared.actions.errors import (
    ActionsError,
    AuthenticationFailed,
    InvalidArgument,
    NotFound,
    ScaleSetNotFound,
)
from shared.api import EphemeralRunnerPhase, is_terminal_phase
from shared.api.names import (
    KIND_EPHEMERAL_RUNNER_SET,
    MESSAGE_OUTDATED,
    REASON_OUTDATED,
    RUNNER_CONTAINER,
    RUNNER_DEPRECATED_EXIT_CODE,
)
from shared.api.views import (
    failure_count,
    has_job,
    is_busy,
    is_terminal,
    last_failure,
    runner_id,
)
from shared.kube.views import (
    controller_owner,
    format_time,
    is_deleting,
    metadata_of,
    parse_time,
    pod_ready,
    status_of,
)
from shared.typedefs import JSONDict

# ARC declares this reason but never writes it; here it explains a runner that ran out of pods.
REASON_TOO_MANY_POD_FAILURES = "TooManyPodFailures"

# Why a busy runner failed: its pod went with its job
# (docs/reconcilers.md#a-busy-runner-loses-its-pod).
REASON_POD_EVICTED = "PodEvicted"
REASON_POD_DELETED = "PodDeleted"

# The pod condition the API server, the kubelet, the scheduler and kube-controller-manager write
# before they take a pod away, and the reasons that are an eviction of a live node's pod.
DISRUPTION_TARGET = "DisruptionTarget"
EVICTION_REASONS = frozenset(
    {"EvictionByEvictionAPI", "TerminationByKubelet", "PreemptionByScheduler"}
)

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


# A runner container not (yet) ended: its pod decides nothing beyond readiness, unless stuck.
LIVE_STATES = frozenset({PodState.NO_RUNNER_STATUS, PodState.STARTED})


def stuck_reason(reason: str) -> bool:
    """A waiting reason that starts the pod's start timeout, or fails it at once."""
    return reason in STUCK_WAITING_REASONS or reason in PERMANENT_WAITING_REASONS


@dataclass(frozen=True, slots=True)
class PodReading:
    state: PodState
    reason: str = ""
    message: str = ""


def read_pod(pod: JSONDict) -> PodReading:
    """Classify a runner pod (docs/reconcilers.md#ephemeralrunner, first match wins)."""
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
class PodLoss:
    """A runner pod's last state as seen, for the report of the job lost with it: its node and
    its `DisruptionTarget` condition (empty reason: none, a plain delete)."""

    node: str = ""
    reason: str = ""
    message: str = ""

    @classmethod
    def of(cls, pod: JSONDict, *, node: str = "") -> PodLoss:
        """`node`: where the pod runs, learnt beside it (the cache keeps no pod spec: the
        reconciler notes the node from the answer to its busy-pod patch)."""
        for condition in status_of(pod).get("conditions") or []:
            if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
                return cls(
                    node=node,
                    reason=str(condition.get("reason") or DISRUPTION_TARGET),
                    message=str(condition.get("message") or ""),
                )
        return cls(node=node)


def pod_taken(pod: JSONDict) -> bool:
    """Whether the pod is being taken away from its runner: deleted, or marked by a
    `DisruptionTarget` condition (evicted by the kubelet, preempted)."""
    return is_deleting(pod) or bool(PodLoss.of(pod).reason)


def lost_job(runner: JSONDict, loss: PodLoss | None) -> PodOutcome:
    """A busy runner whose pod was taken with its job: `Failed`, with the node and the cause in
    its status and a Warning Event; its set replaces it (docs/reconcilers.md#failed-runners). A
    new pod would re-use a consumed JIT config."""
    loss = loss or PodLoss()
    evicted = loss.reason in EVICTION_REASONS
    reason = REASON_POD_EVICTED if evicted else REASON_POD_DELETED
    node = f"node {loss.node}" if loss.node else "an unknown node"
    job = status_of(runner).get("jobId") or status_of(runner).get("jobRequestId")
    message = f"The runner pod on {node} was {'evicted' if evicted else 'deleted'} during job {job}"
    if loss.reason:
        message = f"{message} ({loss.reason}{': ' + loss.message if loss.message else ''})"
    return PodOutcome(
        status={
            "phase": EphemeralRunnerPhase.FAILED.value,
            "ready": False,
            "reason": reason,
            "message": message,
        },
        remove_registration=True,
        warning=(reason, message),
    )


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


def awaits_promotion(runner: JSONDict) -> bool:
    """Whether the runner has a job but not `Running`: what ARC's listener leaves (it writes the
    job fields alone). Never a finished runner or one being deleted."""
    phase = status_of(runner).get("phase") or ""
    return (
        has_job(runner)
        and phase in ("", EphemeralRunnerPhase.PENDING.value)
        and not is_deleting(runner)
    )


def decide_from_pod(
    runner: JSONDict,
    pod: JSONDict,
    *,
    ready: bool,
    now: datetime,
    policy: FailurePolicy,
    promote: bool = False,
    node: str = "",
) -> PodOutcome:
    """The writes that bring a live, non-terminal runner in line with its pod.

    `ready` is `pod_ready(pod)`, passed in so readiness has one definition (the predicate's).
    `promote`: the runner's listener does not write `Running` (ARC's), so a runner whose
    container runs and that `awaits_promotion` is made `Running` here. `node`: where the pod
    runs, when known beside it (`PodLoss.of`).
    """
    reading = read_pod(pod)
    current = status_of(runner)
    if has_job(runner) and reading.state is not PodState.SUCCEEDED and pod_taken(pod):
        return lost_job(runner, PodLoss.of(pod, node=node))
    if reading.state is PodState.NO_RUNNER_STATUS:
        return PodOutcome()
    if reading.state is PodState.STARTED:
        stuck = _stuck_for(pod, reading=reading, now=now, policy=policy)
        if stuck is None or stuck > timedelta(0):
            running = promote and awaits_promotion(runner)
            return PodOutcome(
                status=_started_status(current, ready=ready, reading=reading, running=running),
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


def _started_status(
    current: JSONDict, *, ready: bool, reading: PodReading, running: bool
) -> JSONDict:
    desired: JSONDict = {}
    if running:
        desired["phase"] = EphemeralRunnerPhase.RUNNING.value
    elif not current.get("phase"):
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


# Why a runner could not register (docs/reconcilers.md#registration-failures).
REASON_SCALE_SET_NOT_FOUND = "ScaleSetNotFound"
REASON_CREDENTIALS_REFUSED = "GitHubCredentialsRefused"
REASON_INVALID_GITHUB_CONFIG = "InvalidGitHubConfig"
REASON_REGISTRATION_FAILED = "RegistrationFailed"
REASON_REGISTRATION_TIMED_OUT = "RegistrationTimedOut"


@dataclass(frozen=True, slots=True)
class RegistrationFailure:
    """Why registering a runner failed: `permanent` when only a change by a human can help
    (the runner is failed at once), else the same request may succeed later."""

    reason: str
    message: str
    permanent: bool


def registration_failure(error: Exception, *, scale_set_id: int) -> RegistrationFailure:
    """Classify an error of the JIT config request or of the client it needs. Messages hold
    what the Actions client and the client pool put in theirs: URLs, statuses and object names,
    every credential already scrubbed."""
    if isinstance(error, GitHubConfigError):
        return RegistrationFailure(error.reason, error.message, permanent=True)
    if isinstance(error, ScaleSetNotFound | NotFound):
        return RegistrationFailure(
            REASON_SCALE_SET_NOT_FOUND,
            f"runner scale set {scale_set_id} does not exist on this GitHub configuration "
            "(check runnerScaleSetId)",
            permanent=True,
        )
    if isinstance(error, InvalidArgument):
        return RegistrationFailure(REASON_INVALID_GITHUB_CONFIG, str(error), permanent=True)
    if isinstance(error, AuthenticationFailed) or (
        isinstance(error, ActionsError) and error.status in (401, 403)
    ):
        # The client renews its tokens and repeats a call once on a 401 before raising.
        return RegistrationFailure(REASON_CREDENTIALS_REFUSED, str(error), permanent=True)
    return RegistrationFailure(REASON_REGISTRATION_FAILED, str(error), permanent=False)


def registration_timed_out(runner: JSONDict, *, now: datetime, timeout: timedelta | None) -> bool:
    """Whether the runner has been trying to register for longer than `timeout` (None: never
    too long), counted from its creation."""
    created = runner.get("metadata", {}).get("creationTimestamp")
    if timeout is None or not created:
        return False
    return now - parse_time(str(created)) >= timeout


def retry_delay(runner: JSONDict, *, now: datetime, policy: FailurePolicy) -> timedelta | None:
    """How long to wait before creating the next pod, or None when it may be created now."""
    last = last_failure(runner)
    if last is None:
        return None
    due = last + policy.backoff(failure_count(runner))
    return due - now if now < due else None


def too_many_failures(runner: JSONDict, policy: FailurePolicy) -> bool:
    return failure_count(runner) > policy.max_pod_failures


# Node autoscalers leave a pod with these annotations where it is (docs/reconcilers.md#busy-pods).
BUSY_POD_ANNOTATIONS = {
    "karpenter.sh/do-not-disrupt": "true",
    "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
}


def busy_pod_annotations(runner: JSONDict, pod: JSONDict) -> dict[str, str | None]:
    """The pod annotations to set (a value) or remove (None) so that the pod carries the busy
    annotations exactly while its runner is busy (`shared.api.views.is_busy`); empty when it
    already does. A key the runner's pod template sets is the user's and left alone."""
    busy = is_busy(runner)
    if not busy and is_terminal(runner):
        # A finished runner's pod is deleted next: removing its annotations buys nothing and
        # costs a patch per job.
        return {}
    template = ((runner.get("spec") or {}).get("metadata") or {}).get("annotations") or {}
    current = metadata_of(pod).get("annotations") or {}
    changes: dict[str, str | None] = {}
    for key, value in BUSY_POD_ANNOTATIONS.items():
        if key in template:
            continue
        if busy and current.get(key) != value:
            changes[key] = value
        elif not busy and key in current:
            changes[key] = None
    return changes


def busy_pod_label(runner: JSONDict, pod: JSONDict) -> dict[str, str | None]:
    """The busy label to set (the uid of the runner's EphemeralRunnerSet, whose budget selects
    it) or remove (None) on the pod, as `busy_pod_annotations` decides for the annotations; a
    runner without a set has no budget, and a key the pod template sets is the user's."""
    busy = is_busy(runner)
    if not busy and is_terminal(runner):
        return {}
    template = ((runner.get("spec") or {}).get("metadata") or {}).get("labels") or {}
    owner = controller_owner(runner) or {}
    if LABEL_RUNNER_BUSY in template or owner.get("kind") != KIND_EPHEMERAL_RUNNER_SET:
        return {}
    current = (metadata_of(pod).get("labels") or {}).get(LABEL_RUNNER_BUSY)
    wanted = str(owner.get("uid") or "") if busy else None
    return {} if current == wanted else {LABEL_RUNNER_BUSY: wanted}


def busy_pod_patch(runner: JSONDict, pod: JSONDict) -> JSONDict:
    """The one merge patch of the pod's metadata that carries the busy annotations and label
    (docs/reconcilers.md#busy-pods); empty when the pod is as it should be."""
    patch: JSONDict = {}
    if annotations := busy_pod_annotations(runner, pod):
        patch["annotations"] = annotations
    if labels := busy_pod_label(runner, pod):
        patch["labels"] = labels
    return patch


# --- the plan of one pass ----------------------------------------------------------------------


class Route(enum.Enum):
    """Which branch of a pass a runner takes, in the order the pass asks."""

    FINALIZE = "finalize"
    """Being deleted: unregister, its resources go, then its finalizers."""
    FINISHED = "finished"
    """Terminal, or made so by this process behind a cache that has not shown it: its pod and
    JIT Secret go, nothing else (a pass on the older runner would register it again)."""
    REGISTER = "register"
    """No runner id yet: the JIT config and its Secret first; the pass then plans again."""
    TOO_MANY_FAILURES = "too many pod failures"
    AWAIT_POD = "await its pod"
    """The pod this process created is not cached yet."""
    WITHOUT_POD = "without a pod"
    POD = "pod"
    """The pod's state decides (`decide_from_pod`)."""


POD_EXPECTATION_SECONDS = 5.0
"""How long a pod this process created may be missing from the cache before it is made again."""


@dataclass(frozen=True, slots=True)
class ObservedRunner:
    """What one pass over a runner decides on: the runner and its pod as cached, and what this
    process remembers of it."""

    runner: JSONDict
    pod: JSONDict | None
    now: datetime
    policy: FailurePolicy
    written_phase: str | None = None
    """The phase this process last wrote (the cache may not show it yet)."""
    registered: bool = False
    """This process wrote the runner id (the cache may not show it yet)."""
    pod_created_ago: float | None = None
    """Seconds since this process created the runner's pod; None when it did not."""
    lost_pod: PodLoss | None = None
    """The runner's pod as last seen in a delete event (this process's memory)."""
    pod_node: str = ""
    """The node `pod` runs on, as this process learnt it (the cache keeps no pod spec)."""
    listener_skips_running: bool = False
    """The runner's set is scaled by ARC's listener, which writes a job without `Running`
    (docs/reconcilers.md#arcs-listener); asked only of a runner that `awaits_promotion`."""


@dataclass(frozen=True, slots=True)
class RunnerPlan:
    route: Route
    outcome: PodOutcome | None = None
    """With a pod: what its state means for the runner; without one, for a busy runner, the
    job lost (`lost_job`)."""
    delete_self: bool = False
    """The runner goes now: its job is done, or its pod says so."""
    create_pod: bool = False
    retry_after: timedelta | None = None
    why: str = ""

    @property
    def waits_for_pod(self) -> bool:
        """Whether the pass would look at the runner's pod: not once the runner is being
        deleted or finished. A pod's deletion wakes the runner only then."""
        return self.route not in (Route.FINALIZE, Route.FINISHED)

    def describe(self) -> str:
        """The decision in one line when it is one the pass's own writes do not log (a runner
        failed for its pods, or going at once); empty otherwise."""
        return f"{self.route.value}: {self.why}" if self.why else ""


def plan_runner(observed: ObservedRunner) -> RunnerPlan:
    """The decision of one pass over a runner; the pod's part is `decide_from_pod`."""
    runner, pod = observed.runner, observed.pod
    if is_deleting(runner):
        return RunnerPlan(Route.FINALIZE)
    if is_terminal(runner) or is_terminal_phase(observed.written_phase):
        return RunnerPlan(Route.FINISHED)
    if runner_id(runner) == 0 and not observed.registered:
        return RunnerPlan(Route.REGISTER)
    if too_many_failures(runner, observed.policy):
        return RunnerPlan(
            Route.TOO_MANY_FAILURES,
            why=f"the runner pod failed {len(status_of(runner)['failures'])} times",
        )
    if pod is None:
        created = observed.pod_created_ago
        if created is not None and created < POD_EXPECTATION_SECONDS:
            return RunnerPlan(
                Route.AWAIT_POD, retry_after=timedelta(seconds=POD_EXPECTATION_SECONDS)
            )
        if has_job(runner):
            # Its pod vanished (drained, evicted, its node lost) with the job: a new pod would
            # re-use a consumed JIT config; the runner fails, saying where and why.
            return RunnerPlan(
                Route.WITHOUT_POD,
                lost_job(runner, observed.lost_pod),
                why="its pod went with its job",
            )
        delay = retry_delay(runner, now=observed.now, policy=observed.policy)
        if delay is not None:
            return RunnerPlan(Route.WITHOUT_POD, retry_after=delay)
        return RunnerPlan(Route.WITHOUT_POD, create_pod=True)
    outcome = decide_from_pod(
        runner,
        pod,
        ready=pod_ready(pod),
        now=observed.now,
        policy=observed.policy,
        promote=observed.listener_skips_running,
        node=observed.pod_node,
    )
    if outcome.delete_runner:
        return RunnerPlan(Route.POD, outcome, delete_self=True, why="its pod says it goes")
    if outcome.status.get("phase") == EphemeralRunnerPhase.SUCCEEDED:
        # Its job is done: it goes at once, as in upstream ARC's newer source
        # (docs/reconcilers.md#a-runner-that-succeeded).
        return RunnerPlan(Route.POD, outcome, delete_self=True, why="its job is done")
    return RunnerPlan(Route.POD, outcome)
