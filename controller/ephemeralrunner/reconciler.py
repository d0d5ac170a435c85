"""The EphemeralRunner reconciler: one runner's registration, JIT Secret and Pod.

Order of a pass (ARC's, docs/reconcilers.md#ephemeralrunner, with this project's changes):

1. Read the runner from the cache; gone ends the pass.
2. Deletion branch: remove the runner from the Actions service (job still running: retry later;
   not found: fine; no usable credentials: wait a bounded time, then go without it,
   docs/reconcilers.md#deleting-a-runner), delete the pod, the JIT Secret and the container-hook
   resources labelled for this runner, then drop both finalizers in one write.
3. Terminal runner (Failed, Outdated, or a `Succeeded` one another controller wrote): delete
   its pod and JIT Secret; the EphemeralRunnerSet deletes the runner.
4. Both finalizers, in one write, when one is missing.
5. Registration: JIT config from the service, Secret, then one status write with runner id,
   name and `Pending`. A failure is reported on the runner and fails it at once when only a
   human can fix it, else after `registration_timeout_seconds`
   (docs/reconcilers.md#registration-failures).

Every `Pending` write carries the resourceVersion it was decided on; a Conflict re-reads the
runner and the pass runs again on it, so a lagging cache never overwrites the listener's
`Running`.
6. Pod: created after the failure backoff; its state decides the status (`rules.py`). A runner
   whose container exited 0 is deleted and finalized in the same pass, its set told
   (docs/reconcilers.md#a-runner-that-succeeded). Under ARC's listener, which writes a job
   without `Running`, a `Pending` runner with a job is promoted to `Running` in one optimistic
   status write (docs/reconcilers.md#arcs-listener).

Requests saved against ARC (docs/reconcilers.md#requests): the JIT Secret is read only when the
runner has no id yet or a pod must be created (ARC reads it on every pass), runner id and
`Pending` go out in one status write, and the finalizers are dropped in one write.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from controller.deps import Deps
from controller.ephemeralrunner.metrics import RunnerMetrics
from controller.ephemeralrunner.objects import jit_secret, runner_pod
from controller.ephemeralrunner.predicates import POD_TO_ER, turned_busy
from controller.ephemeralrunner.rules import (
    REASON_REGISTRATION_FAILED,
    REASON_REGISTRATION_TIMED_OUT,
    REASON_TOO_MANY_POD_FAILURES,
    ObservedRunner,
    PodLoss,
    PodOutcome,
    RegistrationFailure,
    Route,
    RunnerPlan,
    awaits_promotion,
    busy_pod_patch,
    plan_runner,
    registration_failure,
    registration_timed_out,
)
from controller.ephemeralrunner.steps import Step
from controller.ephemeralrunner.timeline import pass_span, record_timeline, with_cluster_moments
from controller.github.clients import GitHubConfigError
from controller.github.runners import NameClash, Removal, RunnerStep
from controller.runners.listeners import runs_arc_listener
from controller.runtime import (
    Controller,
    Manager,
    Owns,
    OwnWrite,
    Pass,
    Passes,
    Recall,
    Request,
    Result,
    Store,
    add_finalizers,
    has_any_finalizer,
    remove_finalizers,
)
from controller.runtime.controller import PassSpan
from shared.actions.errors import ActionsError, RunnerExists
from shared.api import EphemeralRunnerPhase, is_terminal_phase
from shared.api import timeline as tl
from shared.api.kinds import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER
from shared.api.names import (
    EPHEMERAL_RUNNER_FINALIZERS,
    FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
    LABEL_RUNNER_POD,
    MESSAGE_INVALID_POD_PREFIX,
    REASON_INVALID_POD,
    SECRET_RUNNER_NAME,
)
from shared.api.views import (
    has_container_hooks,
    is_busy,
    runner_id,
    runner_work_folder,
    secret_runner_id,
)
from shared.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, KubeError, NotFound
from shared.kube.objects import POD, SECRET, Objects
from shared.kube.views import (
    controller_owner,
    controller_owner_uid,
    is_deleting,
    metadata_of,
    parse_time,
    secret_value,
    status_of,
    uid_of,
)
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

REGISTRATION_RETRY_SECONDS = 1.0
ALREADY_EXISTS_RETRY_SECONDS = 5.0
QUOTA_MESSAGE = "exceeded quota:"
PENDING = EphemeralRunnerPhase.PENDING.value
RUNNING = EphemeralRunnerPhase.RUNNING.value
REASON_REGISTRATION_LEFT_BEHIND = "RegistrationLeftBehind"


class EphemeralRunnerReconciler:
    def __init__(
        self,
        *,
        runners: Store,
        pods: Store,
        objects: Objects,
        deps: Deps,
        listeners: Store | None = None,
        metrics: RunnerMetrics | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._runners = runners
        self._pods = pods
        self._listeners = listeners
        self._objects = objects
        self._deps = deps
        self._github = deps.runners
        self._events = deps.events
        self._settings = deps.settings
        self._policy = deps.settings.failure_policy()
        # What this process remembers of each runner (its `Recall`, through the pass): a pod
        # created in the previous pass (its watch event may trail the runner's own status
        # event, and a second create would only earn a 409), the steps already done
        # (unregistered, JIT Secret deleted, pods deleted), which a pass reading an older runner
        # or pod must not repeat, and the status values written.
        self._passes = Passes(
            kind=EPHEMERAL_RUNNER,
            store=runners,
            expectations=deps.expectations,
            objects=objects,
            logger=log,
            events=deps.events,
        )
        self._metrics = metrics
        self._now = now

    def forget(self, request: Request) -> None:
        """The runner left the cache: forget what was noted about it. Only then: until it goes,
        a pass may still read it, even after its last finalizer was removed."""
        self._passes.forget(request)

    def pod_gone_matters(self, pod: JSONDict) -> bool:
        """Whether a pod's deletion wakes its runner (the pod's controller owner): whether the
        plan of a pass over the runner looks at its pod (not once the runner is being deleted or
        finished, made so by this process behind the cache included)."""
        owner = controller_owner(pod) or {}
        runner = self._runners.get(str(metadata_of(pod).get("namespace")), str(owner.get("name")))
        if runner is None or uid_of(runner) != owner.get("uid"):
            return False
        memory = self._passes.recall(runner)
        # The event holds the pod's last state, which no cache keeps: the node and the cause a
        # busy runner's failure names (docs/reconcilers.md#a-busy-runner-loses-its-pod).
        memory.note(Step.POD_LOST, PodLoss.of(pod, node=self._node_of(memory, pod)))
        return plan_runner(self._observe(runner, None, memory)).waits_for_pod

    def _observe(self, runner: JSONDict, pod: JSONDict | None, memory: Recall) -> ObservedRunner:
        created = memory.noted(Step.POD_CREATED)
        written = memory.written_status()
        return ObservedRunner(
            runner=runner,
            pod=pod,
            now=self._now(),
            policy=self._policy,
            written_phase=written.get("phase"),
            registered=bool(written.get("runnerId")),
            pod_created_ago=memory.age(created) if created is not None else None,
            lost_pod=self._lost_pod(memory),
            pod_node=self._node_of(memory, pod) if pod is not None else "",
            listener_skips_running=awaits_promotion(runner)
            and written.get("phase") != RUNNING
            and self._listener_skips_running(runner),
        )

    @staticmethod
    def _node_of(memory: Recall, pod: JSONDict) -> str:
        note = memory.noted((Step.POD_NODE, uid_of(pod)))
        return str(note.value) if note is not None else ""

    @staticmethod
    def _lost_pod(memory: Recall) -> PodLoss | None:
        note = memory.noted(Step.POD_LOST)
        return note.value if note is not None and isinstance(note.value, PodLoss) else None

    def _listener_skips_running(self, runner: JSONDict) -> bool:
        """Whether an AutoscalingListener scaling the runner's set runs ARC's listener, which
        writes a job without `Running` (docs/reconcilers.md#arcs-listener). Without listeners in
        the cluster (`docker run`), the listener is this project's, which always writes it."""
        owner = controller_owner(runner)
        if self._listeners is None or owner is None:
            return False
        namespace = metadata_of(runner).get("namespace")
        return any(
            runs_arc_listener(listener)
            for listener in self._listeners.list()
            if (listener.get("spec") or {}).get("autoscalingRunnerSetNamespace") == namespace
            and (listener.get("spec") or {}).get("ephemeralRunnerSetName") == owner.get("name")
        )

    def _plan(self, p: Pass) -> tuple[JSONDict | None, RunnerPlan]:
        """The runner's pod as cached, and the plan of this pass over the runner."""
        pod = self._pods.get(p.key.namespace, p.key.name)
        decided = plan_runner(self._observe(p.object, pod, p))
        if line := decided.describe():
            p.log.info("plan: %s", line)
        return pod, decided

    def pass_span(self, request: Request) -> PassSpan:
        return pass_span(
            self._runners.get(request.namespace, request.name), request, self._deps.tracer
        )

    async def reconcile(self, request: Request) -> Result:
        runner = self._passes.begin(request)
        if runner is None:
            return Result()
        try:
            return await self._pass(runner)
        except AlreadyExists:
            raise
        except Conflict:
            # A write carrying the resourceVersion it was decided on (a `Pending`, the
            # finalizers) met a runner the API has moved past, e.g. the listener's `Running`
            # behind a lagging cache: decide again on the API's copy.
            try:
                live = await self._objects.get(EPHEMERAL_RUNNER, request.namespace, request.name)
            except NotFound:
                return Result()
            return await self._pass(self._passes.on(live))

    async def _pass(self, runner: Pass) -> Result:
        pod, decided = self._plan(runner)
        if decided.route is Route.FINALIZE:
            return await self._finalize(runner)
        if decided.route is not Route.POD:
            await self._record_timeline(runner, pod)
        if decided.route is Route.FINISHED:
            await self._delete_resources(runner)
            return Result()
        await add_finalizers(runner.lazy, self._objects, EPHEMERAL_RUNNER_FINALIZERS)
        if decided.route is Route.REGISTER:
            retry = await self._register(runner)
            if retry is not None:
                return retry
            # Planned again after its own writes: the runner id is recorded now.
            pod, decided = self._plan(runner)
        if decided.route is Route.TOO_MANY_FAILURES:
            await self._mark_failed(
                runner, reason=REASON_TOO_MANY_POD_FAILURES, message=decided.why.capitalize()
            )
            return Result()
        if decided.retry_after is not None:
            return Result(requeue_after=max(decided.retry_after.total_seconds(), 0.001))
        if decided.delete_self:
            return await self._delete_self(runner)
        if decided.create_pod:
            return await self._create_pod(runner)
        outcome = decided.outcome
        assert outcome is not None
        if pod is None:
            # A busy runner whose pod went with its job: it fails (`rules.lost_job`).
            await self._apply(runner, None, outcome)
            return Result()
        runner.clear(Step.POD_CREATED)
        await self._apply(runner, pod, outcome)
        if not (outcome.delete_pod or is_deleting(pod)):
            await self._protect_busy_pod(runner, pod)
        # After the protection, which matters while the job runs; a pass that ends earlier (the
        # runner goes, or fails) leaves it to the pass on the runner finished or deleted.
        await self._record_timeline(runner, pod)
        if outcome.recheck_after is not None:
            return Result(requeue_after=max(outcome.recheck_after.total_seconds(), 0.001))
        return Result()

    async def _record_timeline(self, runner: Pass, pod: JSONDict | None) -> None:
        await record_timeline(
            runner.object, pod, memory=runner, events=self._events, tracer=self._deps.tracer
        )

    async def _protect_busy_pod(self, runner: Pass, pod: JSONDict) -> None:
        """Keep node autoscalers and drains off the pod while its runner is busy
        (docs/reconcilers.md#busy-pods): one merge patch of its annotations and busy label when
        the runner turns busy, one when it is idle again. The pod watch ignores both, so the
        patch wakes no pass; the note keeps a pass that reads the pod before the cache shows the
        patch from repeating it."""
        if not self._settings.protect_busy_pods:
            return
        changes = busy_pod_patch(runner.object, pod)
        step = (Step.BUSY_POD_ANNOTATIONS, uid_of(pod))
        noted = runner.noted(step)
        if not changes or (noted is not None and noted.value == changes):
            return
        answer = await runner.patch(POD, pod, {"metadata": changes})
        runner.note(step, changes)
        self._observe_protection(runner.object)
        if node := ((answer or {}).get("spec") or {}).get("nodeName"):
            # Named if the job is lost with the pod (`rules.lost_job`): no request of its own.
            runner.note((Step.POD_NODE, uid_of(pod)), node)
        runner.log.info("busy pod metadata written: %s", changes)

    def _observe_protection(self, runner: JSONDict) -> None:
        """How long after the listener's JobStarted write (its `jobStarted` moment, on the
        listener's clock) the busy pod got its protection; nothing for a pod made idle again,
        or a runner without the listener's timeline (ARC's listener writes none). The moment is
        the runner's status, which a tenant may write: one that does not parse is no sample."""
        started = (status_of(runner).get(tl.TIMELINE_FIELD) or {}).get(tl.JOB_STARTED)
        if self._metrics is None or not is_busy(runner) or not isinstance(started, str):
            return
        try:
            moment = tl.parse_moment(started)
        except ValueError:
            return
        self._metrics.protected(runner, (self._now() - moment).total_seconds())

    # --- deletion ------------------------------------------------------------------------------

    async def _finalize(self, runner: Pass) -> Result:
        obj = runner.object
        # The finalizers hold the runner until this pass: its last status, with the listener's
        # timeline, is seen here even when no earlier pass saw it (a lagging controller).
        await self._record_timeline(runner, self._pods.get(runner.key.namespace, runner.key.name))
        if not has_any_finalizer(obj, EPHEMERAL_RUNNER_FINALIZERS) or runner.done(
            Step.FINALIZERS_REMOVED
        ):
            # Done, maybe behind a cache still showing the finalizers this process removed.
            return Result()
        if has_any_finalizer(obj, [FINALIZER_EPHEMERAL_RUNNER_REGISTRATION]) and not runner.done(
            Step.LEFT_BEHIND
        ):
            removal = await self._remove_registration(runner)
            if removal is Removal.BUSY and not await self._gave_up_waiting(runner):
                return Result(requeue_after=self._settings.job_still_running_retry_seconds)
            if removal is Removal.NO_CREDENTIALS:
                wait = await self._credentials_wait(runner)
                if wait is not None:
                    return Result(requeue_after=wait)
        await self._delete_resources(runner)
        if has_container_hooks(obj):
            await self._delete_hook_resources(runner)
        await remove_finalizers(runner.lazy, self._objects, EPHEMERAL_RUNNER_FINALIZERS)
        runner.note(Step.FINALIZERS_REMOVED)
        runner.log.info("finalizers removed")
        return Result()

    async def _gave_up_waiting(self, p: Pass) -> bool:
        """Whether a runner the service still calls busy has been deleting for longer than
        `registration_removal_timeout_seconds` (a pod lost with its job keeps the service saying
        so until it times the job out, and the deleting runner holds its slot meanwhile)."""
        runner = p.object
        timeout = self._settings.registration_removal_timeout_seconds
        if not timeout:
            return False
        since = parse_time(runner["metadata"]["deletionTimestamp"])
        if self._now() - since < timedelta(seconds=timeout):
            return False
        await self._left_behind(
            p,
            f"The service still reports a job on runner {runner_id(runner)} after "
            f"{timeout:.0f} s; deleting the runner without unregistering it",
        )
        return True

    async def _credentials_wait(self, p: Pass) -> float | None:
        """How long a deleting runner that cannot be unregistered for want of usable GitHub
        credentials still waits for them; None once `missing_credentials_removal_timeout_seconds`
        from its deletion have passed (a Warning Event and the metric say it stays registered).
        Without the bound a deleted config Secret (namespace deletion removes it at once, while
        the runners wait on their finalizers) would hold the runner, its set and the namespace
        for ever."""
        runner = p.object
        timeout = self._settings.missing_credentials_removal_timeout_seconds
        since = parse_time(runner["metadata"]["deletionTimestamp"])
        left = timeout - (self._now() - since).total_seconds()
        if left > 0:
            return min(left, self._settings.job_still_running_retry_seconds)
        await self._left_behind(
            p,
            f"No usable GitHub credentials to unregister runner {runner_id(runner)} after "
            f"{timeout:.0f} s (secret {(runner.get('spec') or {}).get('githubConfigSecret')}); "
            "deleting the runner without unregistering it",
        )
        return None

    async def _left_behind(self, runner: Pass, message: str) -> None:
        """Report, once per runner, that it goes without being unregistered."""
        if not runner.do_once(Step.LEFT_BEHIND):
            return
        if self._metrics is not None:
            self._metrics.left_behind(runner.object)
        await runner.warn(REASON_REGISTRATION_LEFT_BEHIND, message)

    async def _remove_registration(self, p: Pass) -> Removal:
        """Unregister the runner (a runner never registered counts as removed)."""
        if self._github.unregistered(p):
            return Removal.REMOVED
        runner = p.object
        rid = runner_id(runner) or await self._id_from_secret(runner)
        if rid == 0:
            return Removal.REMOVED
        removal = await self._github.remove(runner, rid, p)
        if removal is Removal.BUSY:
            log.info(
                "runner still has a job, removal retried later",
                extra={"runner": metadata_of(runner)["name"]},
            )
        return removal

    async def _id_from_secret(self, runner: JSONDict) -> int:
        """The id of a runner registered just before its status could record it."""
        meta = runner["metadata"]
        try:
            secret = await self._objects.get(SECRET, meta["namespace"], meta["name"])
        except NotFound:
            return 0
        return secret_runner_id(secret)

    def _collected(self, runner: Pass, pod: JSONDict | None) -> bool:
        """Whether the garbage collector deletes the runner's pod and JIT Secret, both owned by
        it (`objects.py`): once the runner is being deleted, or `Succeeded` (its set deletes it
        next), an own delete of either is a request the cluster makes anyway
        (docs/reconcilers.md#what-the-garbage-collector-deletes). A pod of another owner, a
        `Failed` or `Outdated` runner that stays, are deleted here."""
        if pod is not None and controller_owner_uid(pod) != runner.uid:
            return False
        succeeded = EphemeralRunnerPhase.SUCCEEDED.value
        return is_deleting(runner.object) or succeeded in (
            status_of(runner.object).get("phase"),
            runner.written_status().get("phase"),
        )

    async def _delete_resources(self, runner: Pass) -> None:
        pod = self._pods.get(runner.key.namespace, runner.key.name)
        if self._collected(runner, pod):
            return
        if pod is not None and not is_deleting(pod):
            deleted = (Step.POD_DELETED, uid_of(pod))
            if not runner.done(deleted):
                await runner.delete(POD, pod)
                runner.note(deleted)
        if not runner.done(Step.SECRET_DELETED):
            await runner.delete(SECRET, runner.key)
            runner.note(Step.SECRET_DELETED)

    async def _delete_hook_resources(self, runner: Pass) -> None:
        meta = runner.object["metadata"]
        selector = {LABEL_RUNNER_POD: meta["name"]}
        for pod in self._pods.list(meta["namespace"], labels=selector):
            if not is_deleting(pod):
                await runner.delete(POD, pod)
        listing = await self._objects.list(
            SECRET, meta["namespace"], label_selector=f"{LABEL_RUNNER_POD}={meta['name']}"
        )
        for secret in listing.get("items") or []:
            if not is_deleting(secret):
                await runner.delete(SECRET, secret)

    # --- live runner -----------------------------------------------------------------------------

    async def _register(self, runner: Pass) -> Result | None:
        """Record the runner id and name from the JIT Secret, creating both when missing."""
        obj = runner.object
        meta = obj["metadata"]
        secret: JSONDict | None = None
        # A runner this process made has no Secret until this process makes it: no GET.
        if not runner.done(RunnerStep.CREATED_WITHOUT_SECRET):
            with contextlib.suppress(NotFound):
                secret = await self._objects.get(SECRET, meta["namespace"], meta["name"])
        if secret is None:
            created = await self._create_jit_secret(runner)
            if isinstance(created, Result):
                return created
            runner.clear(RunnerStep.CREATED_WITHOUT_SECRET)
            secret = created
        rid = secret_runner_id(secret)
        if rid == 0:
            await runner.delete(SECRET, secret)
            return Result(requeue_after=REGISTRATION_RETRY_SECONDS)
        current = status_of(obj)
        desired: JSONDict = {
            "runnerId": rid,
            "runnerName": secret_value(secret, SECRET_RUNNER_NAME) or meta["name"],
        }
        if not current.get("phase"):
            desired["phase"] = PENDING
        if current.get("reason") == REASON_REGISTRATION_FAILED:
            # A registration failure reported earlier is over.
            desired.update(reason="", message="")
        await runner.write_status(desired, optimistic=desired.get("phase") == PENDING)
        return None

    async def _create_jit_secret(self, runner: Pass) -> JSONDict | Result:
        obj = runner.object
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        scale_set_id = int(spec.get("runnerScaleSetId") or 0)
        try:
            config = await self._github.jit_config(
                obj, scale_set_id, work_folder=runner_work_folder(obj)
            )
        except RunnerExists:
            return await self._resolve_name_clash(runner, scale_set_id)
        except (ActionsError, GitHubConfigError) as exc:
            failure = registration_failure(exc, scale_set_id=scale_set_id)
            if not await self._registration_failed(runner, failure):
                raise
            return Result()
        body = jit_secret(
            obj,
            encoded_jit_config=config.encoded_jit_config.get_secret_value(),
            runner_name=config.runner.name or meta["name"],
            runner_id=config.runner.id,
            scale_set_id=config.runner.runner_scale_set_id or scale_set_id,
            excluded_prefixes=self._settings.exclude_label_propagation_prefixes,
        )
        try:
            return await runner.create(SECRET, meta["namespace"], body, unseen=False)
        except AlreadyExists:
            return await self._objects.get(SECRET, meta["namespace"], meta["name"])

    async def _registration_failed(self, runner: Pass, failure: RegistrationFailure) -> bool:
        """Report a failed registration on the runner; True when the runner is now `Failed`
        (the failure is permanent, or registration has been failing for longer than
        `registration_timeout_seconds`), False when the request is to be retried."""
        obj = runner.object
        timeout = self._settings.registration_timeout_seconds
        if failure.permanent or registration_timed_out(
            obj, now=self._now(), timeout=timedelta(seconds=timeout) if timeout else None
        ):
            reason, message = failure.reason, failure.message
            if not failure.permanent:
                reason = REASON_REGISTRATION_TIMED_OUT
                message = f"Not registered {timeout:.0f} s after creation; last error: {message}"
            await self._mark_failed(runner, reason=reason, message=message)
            return True
        desired: JSONDict = {"reason": failure.reason, "message": failure.message}
        if status_of(obj).get("reason") != failure.reason and await runner.write_status(
            desired, compare=("reason",)
        ):
            await runner.warn(failure.reason, failure.message)
        return False

    async def _resolve_name_clash(self, p: Pass, scale_set_id: int) -> Result:
        """A runner of this name is registered but its JIT config was lost: remove it when it
        belongs to this scale set (then register again), else the name is taken for good."""
        runner = p.object
        meta = runner["metadata"]
        if await self._github.free_name(runner, scale_set_id) is NameClash.FREED:
            return Result(requeue_after=REGISTRATION_RETRY_SECONDS)
        await p.warn(
            "RunnerNameTaken", f"A runner named {meta['name']} exists in another scale set"
        )
        return await self._delete_self(p)

    async def _create_pod(self, runner: Pass) -> Result:
        obj = runner.object
        meta = obj["metadata"]
        try:
            await runner.create(POD, meta["namespace"], runner_pod(obj), unseen=False)
            runner.note(Step.POD_CREATED)
            runner.log.info("pod created")
        except AlreadyExists:
            return Result(requeue_after=ALREADY_EXISTS_RETRY_SECONDS)
        except Forbidden as exc:
            if QUOTA_MESSAGE not in exc.message:
                await self._pod_refused(runner, exc)
                return Result()
            age = self._now() - parse_time(meta["creationTimestamp"])
            if age > timedelta(seconds=self._settings.quota_give_up_seconds):
                return await self._delete_self(runner)
            return Result(requeue_after=self._settings.quota_retry_seconds)
        except Invalid as exc:
            await self._pod_refused(runner, exc)
        return Result()

    async def _pod_refused(self, runner: Pass, exc: KubeError) -> None:
        await self._mark_failed(
            runner,
            reason=REASON_INVALID_POD,
            message=MESSAGE_INVALID_POD_PREFIX + exc.status_message,
        )

    async def _mark_failed(self, runner: Pass, *, reason: str, message: str) -> None:
        """Unregister first, so a failed unregistration retries the whole step (ARC wrote the
        status first and never retried the removal: docs/reconcilers.md#failed-runners)."""
        await self._remove_registration(runner)
        desired: JSONDict = {
            "phase": EphemeralRunnerPhase.FAILED.value,
            "ready": False,
            "reason": reason,
            "message": message,
        }
        await runner.write_status(desired)
        await runner.warn(reason, message)
        # The pass goes on as one on the terminal runner would (its echo wakes nothing).
        await self._delete_resources(runner)

    async def _apply(self, runner: Pass, pod: JSONDict | None, outcome: PodOutcome) -> None:
        obj = runner.object
        if outcome.remove_registration:
            await self._remove_registration(runner)
        if pod is not None:
            outcome = with_cluster_moments(outcome, obj, pod)
        if outcome.status:
            # A `Pending` carries the resourceVersion it was decided on: behind a lagging cache
            # it must not overwrite the listener's `Running` (a Conflict re-reads the runner);
            # so does a promotion to `Running`, never laid over a terminal phase or a deletion
            # the cache has not shown.
            await runner.write_status(
                outcome.status,
                optimistic=outcome.status.get("phase") in (PENDING, RUNNING),
                deep=True,
            )
        terminal = is_terminal_phase(outcome.status.get("phase"))
        if outcome.delete_pod and not terminal and pod is not None:
            await runner.delete(POD, pod)
        if outcome.warning is not None:
            reason, message = outcome.warning
            await runner.warn(reason, message)
        if terminal:
            # The pass goes on as one on the terminal runner would (its echo wakes nothing).
            await self._delete_resources(runner)

    async def _delete_self(self, runner: Pass) -> Result:
        """Delete the runner and finalize it in the same pass; its pod and JIT Secret go with it
        through the garbage collector."""
        held = await runner.delete_self()
        return Result() if held is None else await self._finalize(self._passes.on(held))


def setup(manager: Manager, deps: Deps) -> EphemeralRunnerReconciler:
    """Add the EphemeralRunner controller to `manager`: runners, and the Pods they own."""
    reconciler = EphemeralRunnerReconciler(
        runners=manager.cache(EPHEMERAL_RUNNER),
        # Its pods' metadata and status: their spec is this reconciler's own, never read back.
        pods=manager.cache(POD, reads=("status",)),
        objects=manager.objects,
        deps=deps,
        metrics=RunnerMetrics(manager.metrics.metrics.meter),
        # Listeners run in the cluster only in the in-cluster mode (the cache the listener
        # reconciler keeps anyway); under `docker run` the listener is always this project's.
        listeners=manager.cache(AUTOSCALING_LISTENER) if deps.listener is not None else None,
    )
    manager.add(
        Controller(
            name="ephemeralrunner",
            for_=EPHEMERAL_RUNNER,
            reconciler=reconciler,
            owns=[Owns(POD, predicate=POD_TO_ER, wake_on_delete=reconciler.pod_gone_matters)],
            deleted=reconciler.forget,
            urgent=turned_busy,
            # Every write of a pass is followed by the rest of the pass on the server's answer.
            own_writes=frozenset(OwnWrite),
        )
    )
    return reconciler
