"""The EphemeralRunnerSet reconciler: how many runners exist, and which ones go.

Each pass observes the set (`_observe`: its runners from the index with what this process did
that the cache does not show yet, the remembered cleanup marker, the owner's `maxRunners`),
asks `rules.plan` what to do (logged in one line), and applies it through the pass. The wake
rules ask the same `plan` of the set after an event (`Plan.acts`), so they cannot drift from
the pass. The order of a plan (ARC's with the newer upstream rules,
docs/reconcilers.md#ephemeralrunnerset):

1. Deletion: delete terminated runners, unregister and delete idle ones, let busy ones finish;
   drop the finalizer once no runner is left.
2. Finalizer, in one write with the runner spec's hash and, for a set no AutoscalingRunnerSet
   controls whose runner spec changed, an advanced `spec.actionableRevision`.
   Then the set's PodDisruptionBudget over its busy runner pods, made once and its spec kept
   (docs/reconcilers.md#busy-pods).
3. A `spec.actionableRevision` above `appliedActionableRevision`: clean up (terminated and idle
   runners go, busy ones finish) and record `appliedActionableRevision`, resetting
   `finishedRunnerCleanupPatchID`; then plan again on the set as written.
4. Outdated set: clean up only, no scaling.
5. Retire stale Outdated runners; replace failed runners whose backoff ran out, one for one.
6. Scaling under the patch-id protocol: finished runners are cleaned up in a pass of their own
   that records the patch id (then plan again); scale up (never to fill the gap that cleanup
   made); scale down only under patch id 0, never a busy runner, each victim unregistered before
   it is deleted.
7. Status: counts by phase, phase, `appliedActionableRevision` and
   `finishedRunnerCleanupPatchID`; gauges.

The marker `finishedRunnerCleanupPatchID` is remembered from this process's own status writes:
only the leader writes it, and the cache may not have seen the write when the deletions it caused
come back as events. Upstream re-reads it from the API instead.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from controller.deps import Deps
from controller.ephemeralrunnerset.children import ChildIndex
from controller.ephemeralrunnerset.metrics import RunnerSetMetrics
from controller.ephemeralrunnerset.objects import busy_budget, new_ephemeral_runner, proxy_secret
from controller.ephemeralrunnerset.predicates import (
    COUNTS_WINDOW_SECONDS,
    ER_COUNTS,
    ER_TO_ERS,
    PDB_TO_ERS,
)
from controller.ephemeralrunnerset.rules import (
    NAMESPACE_REFUSAL_HOLD,
    Budget,
    Children,
    Finalizing,
    Observed,
    Plan,
    SpecRevision,
    budget_drift,
    cleanup_candidates,
    counts_status,
    creates_held,
    lineage,
    only_listener_fields_changed,
    owner_max_runners,
    plan,
    scale_down_candidates,
)
from controller.github.clients import REASON_INVALID_NAME
from controller.github.network import proxy_data
from controller.github.runners import RunnerStep
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH
from controller.runtime import (
    Controller,
    LazyObject,
    Manager,
    Owns,
    OwnWrite,
    Pass,
    Passes,
    Recall,
    Request,
    Result,
    RulePredicate,
    Store,
    add_finalizers,
    remove_finalizers,
)
from shared.api import patchid
from shared.api.kinds import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.api.names import (
    ANNOTATION_PATCH_ID,
    EPHEMERAL_RUNNER_SET_FINALIZERS,
    FINALIZER_EPHEMERAL_RUNNER_SET,
)
from shared.api.references import runner_spec_name_problems
from shared.api.views import runner_id
from shared.kube.errors import Conflict, Forbidden, NamespaceTerminating
from shared.kube.objects import POD_DISRUPTION_BUDGET, SECRET, Objects
from shared.kube.views import (
    annotation_int,
    controller_owner,
    is_deleting,
    metadata_of,
    spec_int,
    status_int,
    status_of,
    uid_of,
)
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

CREATE_CONCURRENCY = 8
CLEANUP_MARKER = patchid.CLEANUP_MARKER_FIELD
REASON_ABOVE_MAX_RUNNERS = "ReplicasAboveMaxRunners"
REASON_REPLACING_FAILED = "ReplacingFailedRunner"
REASON_BUDGET_TAKEN = "BusyRunnerBudgetTaken"
REASON_BUDGET_REFUSED = "BusyRunnerBudgetRefused"


class SetStep(Enum):
    """The steps of a set's passes, in its `Recall`."""

    CLEANUP_MARKER = "cleanup marker"
    """The `finishedRunnerCleanupPatchID` last written (or held back to go with the counts)."""
    NAMESPACE_REFUSED = "namespace refused"
    """When the namespace last refused a runner's create: it is being deleted."""


@dataclass(slots=True)
class StatusWrites:
    """A set's typed memory: when this process last wrote its status, to coalesce count
    writes (docs/reconcilers.md#status-writes)."""

    last: datetime | None = None


async def _gather_all(aws: Iterable[Awaitable[object]]) -> list[object]:
    """Run all to the end, then raise the first failure: one failed request must not cancel
    the others of the batch mid-flight."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


class EphemeralRunnerSetReconciler:
    def __init__(
        self,
        *,
        runner_sets: Store,
        runners: Store,
        scale_sets: Store,
        budgets: Store,
        children: ChildIndex,
        objects: Objects,
        deps: Deps,
        metrics: RunnerSetMetrics | None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._sets = runner_sets
        self._runners = runners
        # The AutoscalingRunnerSets, for the maxRunners of the one that owns a set.
        self._scale_sets = scale_sets
        # The PodDisruptionBudgets, for the one named like each set (docs/reconcilers.md#busy-pods).
        self._budgets = budgets
        self._children = children
        self._objects = objects
        self._deps = deps
        self._settings = deps.settings
        self._replacement = deps.settings.replacement_policy()
        # What this process remembers of each set, through the pass: runners created and
        # deleted that the cache has not shown yet (without them a pass under patch id 0, or
        # under a new patch id whose runners are not cached yet, creates the same runners twice:
        # docs/reconcilers.md#expectations), status values written, the cleanup marker, when
        # the status was last written; and of each runner, whether it was unregistered.
        self._passes = Passes(
            kind=EPHEMERAL_RUNNER_SET,
            store=runner_sets,
            expectations=deps.expectations,
            objects=objects,
            logger=log,
            events=deps.events,
        )
        self._metrics = metrics
        self._now = now
        # Bounds the Actions removals and deletes one pass runs at once.
        self._removals = asyncio.Semaphore(CREATE_CONCURRENCY)

    # --- wake rules: the pass's own plan of the set after the event ----------------------------

    def wakes_on_update(self, old: JSONDict, new: JSONDict) -> bool:
        """The set's update predicate: False for a patch of replicas and patch id alone (the
        listener's) when the plan of a pass over the new set does nothing but its status
        (`Plan.acts`). Measured: docs/reconcilers.md#wakes-per-runner."""
        return not only_listener_fields_changed(old, new) or self._acts(new)

    def wakes_on_runner_gone(self, runner: JSONDict) -> bool:
        """Whether a runner's delete event wakes its set: not when the runner was being deleted
        already (it was in no count, so the status does not change) and the plan of a pass over
        the set does nothing now that it is gone, as when the listener's count went down before
        the runner went. The index is an earlier handler of the same informer: a runner it
        still holds has not gone for it, and wakes the set."""
        if not is_deleting(runner) or Request.of(runner) in self._children:
            return True
        owner = controller_owner(runner)
        if owner is None or owner.get("kind") != EPHEMERAL_RUNNER_SET.kind:
            return True
        runner_set = self._sets.get(Request.of(runner).namespace, str(owner.get("name")))
        return runner_set is None or self._acts(runner_set)

    def _acts(self, runner_set: JSONDict) -> bool:
        """`rules.plan(...).acts` of the set as a pass would observe it now. (A pass running on
        the set decided on what it read then: the runtime wakes it again whatever this says.)"""
        memory = self._passes.recall(runner_set)
        return plan(self._observe(runner_set, memory, pinned=False)).acts

    def _observe(self, runner_set: JSONDict, memory: Recall, *, pinned: bool = True) -> Observed:
        """What a pass decides on: the runner index with what this process created and deleted
        that the cache does not show yet laid over it, the remembered cleanup marker, the
        owner's bound, the time. `pinned`: the runners are kept as they are now through the
        pass's awaits (`ChildIndex.children`); a wake rule reads them at once."""
        applied = status_int(runner_set, "appliedActionableRevision")
        revision = spec_int(runner_set, "actionableRevision")
        return Observed(
            runner_set=runner_set,
            children=self._children_of(runner_set, memory, applied, pinned=pinned),
            cleanup_marker=self._cleanup_marker(memory, runner_set),
            max_runners=owner_max_runners(runner_set, self._scale_sets.get),
            now=self._now(),
            replacement=self._replacement,
            advancing=(
                self._children_of(runner_set, memory, revision, pinned=pinned)
                if revision > applied
                else None
            ),
            creates_refused_at=self._refused_at(memory),
            budget=self._budgets.get(
                metadata_of(runner_set)["namespace"], metadata_of(runner_set)["name"]
            ),
            protect_busy_pods=self._settings.protect_busy_pods,
        )

    @staticmethod
    def _refused_at(memory: Recall) -> datetime | None:
        note = memory.noted(SetStep.NAMESPACE_REFUSED)
        return note.value if note is not None and isinstance(note.value, datetime) else None

    def _children_of(
        self, runner_set: JSONDict, memory: Recall, revision: int, *, pinned: bool = True
    ) -> Children:
        namespace = metadata_of(runner_set).get("namespace", "")
        unseen = memory.unseen(lambda name: self._runners.get(namespace, name))
        return self._children.children(
            memory.uid, applied_revision=revision, unseen=unseen, pinned=pinned
        )

    @staticmethod
    def _cleanup_marker(memory: Recall, runner_set: JSONDict) -> int:
        """`finishedRunnerCleanupPatchID` as this process last wrote it, else as cached."""
        note = memory.noted(SetStep.CLEANUP_MARKER)
        if note is not None and isinstance(note.value, int):
            return note.value
        return status_int(runner_set, CLEANUP_MARKER)

    def _plan(self, p: Pass) -> tuple[Observed, Plan]:
        observed = self._observe(p.object, p)
        decided = plan(observed)
        if line := decided.describe(observed.children):
            p.log.info("plan: %s", line)
        return observed, decided

    # --- the pass: apply the plan --------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        p = self._passes.begin(request)
        if p is None:
            self._forget(request)
            return Result()
        observed, decided = self._plan(p)
        if decided.finalizing is not None:
            return await self._finalize(p, observed.children, decided.finalizing)
        if decided.spec_revision is not None:
            self._stage_spec_revision(p.lazy, decided.spec_revision)
        try:
            await add_finalizers(p.lazy, self._objects, [FINALIZER_EPHEMERAL_RUNNER_SET])
            if p.copied:
                await p.write(optimistic=True)
        except Conflict:
            # Decided on a copy the API has moved past (a listener patch, or this process's
            # own write the cache has not shown): the watch event of the newer copy comes back.
            return Result()
        if decided.spec_revision is not None and decided.spec_revision.revision is not None:
            # Planned again after its own write: the revision it advanced is applied now.
            observed, decided = self._plan(p)
        await self._ensure_budget(p, observed, decided.budget)

        if decided.apply_revision is not None:
            await self._clean_up(p, observed.children)
            p.note(SetStep.CLEANUP_MARKER, 0)
            await self._write_status(
                p,
                observed.children,
                phase=decided.revision_phase,
                extra={"appliedActionableRevision": decided.apply_revision, CLEANUP_MARKER: 0},
            )
            # Planned again after its own writes: the pass goes on as the one its echo woke used
            # to, on the revision now applied.
            observed, decided = self._plan(p)

        if decided.outdated:
            await self._clean_up(p, observed.children)
            await self._write_status(p, observed.children, phase=decided.phase)
            return Result()

        for stale in decided.stale:
            await p.delete(EPHEMERAL_RUNNER, stale)
        if decided.above_max:
            await p.warn(
                REASON_ABOVE_MAX_RUNNERS,
                f"replicas={decided.written_replicas} is above the AutoscalingRunnerSet's "
                f"maxRunners={decided.max_runners}: running at most {decided.replicas}",
            )
        else:
            p.settle(REASON_ABOVE_MAX_RUNNERS)
        await self._replace_failed(p, decided)
        requeue = await self._scale(p, observed, decided)
        # The status counts what this pass created and deleted too.
        current = self._children_of(p.object, p, status_int(p.object, "appliedActionableRevision"))
        held = await self._write_status(p, current, phase=decided.phase, coalesce=True)
        return requeue.sooner(held)

    @staticmethod
    def _stage_spec_revision(runner_set: LazyObject, tracked: SpecRevision) -> None:
        """Stage the runner spec's hash and an advanced revision (docs/reconcilers.md#revisions);
        the finalizer's write, or the one after it, sends them."""
        obj = runner_set.mutate()
        obj["metadata"].setdefault("annotations", {})[ANNOTATION_RUNNER_SPEC_HASH] = (
            tracked.spec_hash
        )
        if tracked.revision is not None:
            obj.setdefault("spec", {})["actionableRevision"] = tracked.revision

    async def _ensure_budget(self, p: Pass, observed: Observed, step: Budget | None) -> None:
        """The set's PodDisruptionBudget (docs/reconcilers.md#busy-pods): made once, its spec
        corrected; one of that name that is not the set's is left alone and reported."""
        if step is Budget.TAKEN:
            await p.warn(
                REASON_BUDGET_TAKEN,
                f"PodDisruptionBudget {p.key.name} is not this set's: its busy runners are not "
                "kept off drains until it is deleted",
            )
            return
        p.settle(REASON_BUDGET_TAKEN)
        if step is not Budget.ENSURE:
            return
        desired = busy_budget(p.object)
        current = observed.budget
        if current is not None and "maxUnavailable" in (current.get("spec") or {}):
            # A merge patch keeps a field it does not name: null removes it.
            desired["spec"]["maxUnavailable"] = None
        set_uid = p.uid
        try:
            await p.ensure(
                POD_DISRUPTION_BUDGET,
                desired,
                current,
                drift=lambda found, _: budget_drift(found, set_uid),
            )
        except NamespaceTerminating:
            return  # the set's deletion follows
        except Forbidden as exc:
            # RBAC from before the budgets (manifests/ not re-applied): scaling goes on.
            await p.warn(
                REASON_BUDGET_REFUSED,
                f"PodDisruptionBudget {p.key.name} refused ({exc.status_message}): its busy "
                "runners are not kept off drains",
            )
            return
        p.settle(REASON_BUDGET_REFUSED)

    # --- scaling -------------------------------------------------------------------------------

    async def _scale(self, p: Pass, observed: Observed, decided: Plan) -> Result:
        result = Result(requeue_after=decided.wait.total_seconds()) if decided.wait else Result()
        scaling = decided.scaling
        if scaling is None:
            return result
        if scaling.cleanup_finished:
            patch_id = decided.patch_id
            p.note(SetStep.CLEANUP_MARKER, patch_id)
            # Held with the counts: until written, the note is what this process reads.
            held = await self._write_status(
                p,
                observed.children,
                phase=decided.phase,
                extra={CLEANUP_MARKER: patch_id},
                coalesce=True,
            )
            result = result.sooner(held)
            for finished in observed.children.finished:
                await p.delete(EPHEMERAL_RUNNER, finished)
            # Planned again after its own writes, as the pass its echo woke used to, with the
            # finished runners deleting: under this patch id that plan only says why it does not
            # scale up.
            observed, decided = self._plan(p)
            scaling = decided.scaling
            if scaling is None or scaling.cleanup_finished:
                return result
        if scaling.create:
            await self._create_runners(p, count=scaling.create, patch_id=decided.patch_id)
            if refused := creates_held(self._refused_at(p), self._now()):
                result = result.sooner(refused.total_seconds())
        if scaling.scale_down:
            await self._scale_down(p, observed.children, count=scaling.scale_down)
        return result

    async def _create_runners(
        self, p: Pass, *, count: int, patch_id: int, lineage_of: int = 0
    ) -> None:
        runner_set = p.object
        body = new_ephemeral_runner(
            runner_set,
            patch_id=patch_id,
            revision=status_int(runner_set, "appliedActionableRevision"),
            lineage=lineage_of,
            excluded_prefixes=self._settings.exclude_label_propagation_prefixes,
        )
        namespace = runner_set["metadata"]["namespace"]
        spec = (runner_set.get("spec") or {}).get("ephemeralRunnerSpec") or {}
        # A name that is not one would address another namespace's Secret (its proxy
        # credentials) or fail every runner made from it: refuse the set here, saying which field
        # (docs/security.md#names-from-tenants), and make nothing.
        if problems := runner_spec_name_problems(spec, at="spec.ephemeralRunnerSpec"):
            await p.warn(REASON_INVALID_NAME, "; ".join(problems))
            return
        if spec.get("proxy"):
            await self._ensure_proxy_secret(p, spec["proxy"])
        limit = asyncio.Semaphore(CREATE_CONCURRENCY)
        sent = 0

        async def create() -> None:
            nonlocal sent
            async with limit:
                if creates_held(self._refused_at(p), self._now()):
                    return
                sent += 1
                try:
                    created = await p.create(EPHEMERAL_RUNNER, namespace, body)
                except NamespaceTerminating:
                    self._refused(p, count - sent)
                    return
            p.about(uid_of(created)).note(RunnerStep.CREATED_WITHOUT_SECRET)

        # The first create alone: a namespace being deleted refuses it, and then none of the
        # others is sent (on a real control plane a set sent every missing runner on each pass).
        await create()
        await _gather_all(create() for _ in range(count - 1))

    def _refused(self, p: Pass, unsent: int) -> None:
        """Note the refusal (`rules.creates_held` then holds creates) and say so once: no Event
        can be posted into a namespace being deleted."""
        if p.noted(SetStep.NAMESPACE_REFUSED) is None:
            p.log.info(
                "namespace %s is being deleted and refused a runner's create: creating none for "
                "%d s (%d create(s) of this pass not sent)",
                p.key.namespace,
                NAMESPACE_REFUSAL_HOLD.total_seconds(),
                unsent,
            )
        p.note(SetStep.NAMESPACE_REFUSED, self._now())

    async def _ensure_proxy_secret(self, p: Pass, proxy: JSONDict) -> None:
        """The Secret runner pods read their proxy variables from, brought up to date before
        runners are created (ARC read it on every pass)."""
        meta = p.object["metadata"]
        data = {
            k: base64.b64encode(v.encode()).decode()
            for k, v in (await proxy_data(self._objects, meta["namespace"], proxy)).items()
        }
        await p.ensure(SECRET, proxy_secret(p.object, data), drift=_data_drift, replace=True)

    async def _replace_failed(self, p: Pass, decided: Plan) -> None:
        for index, failed in enumerate(decided.replace):
            if index < decided.replacements:
                await self._create_runners(
                    p,
                    count=1,
                    patch_id=annotation_int(failed, ANNOTATION_PATCH_ID) or 0,
                    lineage_of=lineage(failed) + 1,
                )
            name = failed["metadata"]["name"]
            reason = status_of(failed).get("reason") or "Failed"
            await p.warn(
                REASON_REPLACING_FAILED,
                f"Runner {name} failed ({reason}); replacing it",
                subject=uid_of(failed),
            )
            if self._metrics is not None:
                self._metrics.replaced_failed.add(1, {"namespace": p.key.namespace})
            await p.delete(EPHEMERAL_RUNNER, failed)

    async def _scale_down(self, p: Pass, children: Children, *, count: int) -> None:
        """Retire `count` victims in candidate order; a victim that took a job meanwhile (or
        could not be unregistered) is replaced by the next candidate, in parallel batches."""
        candidates = scale_down_candidates(children)
        removed, start = 0, 0
        errors: list[BaseException] = []
        while removed < count and start < len(candidates):
            batch = candidates[start : start + count - removed]
            start += len(batch)
            results = await asyncio.gather(
                *(self._retire(p, victim) for victim in batch), return_exceptions=True
            )
            removed += sum(1 for r in results if r is True)
            errors += [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _retire(self, p: Pass, runner: JSONDict) -> bool:
        """Unregister an idle runner, then delete it; False when it took a job meanwhile."""
        async with self._removals:
            rid = runner_id(runner)
            memory = p.about(uid_of(runner))
            if rid and not await self._deps.runners.unregister(runner, rid, memory):
                return False
            await p.delete(EPHEMERAL_RUNNER, runner)
            return True

    # --- cleanup and deletion --------------------------------------------------------------------

    async def _clean_up(self, p: Pass, children: Children) -> None:
        """Terminated runners go; idle ones are unregistered and go; busy ones finish."""
        for runner in children.terminated:
            await p.delete(EPHEMERAL_RUNNER, runner)
        await _gather_all(self._retire(p, runner) for runner in cleanup_candidates(children))

    async def _finalize(self, p: Pass, children: Children, finalizing: Finalizing) -> Result:
        if finalizing is Finalizing.CLEAN_UP:
            await self._clean_up(p, children)
        elif finalizing is Finalizing.RELEASE:
            await remove_finalizers(p.lazy, self._objects, EPHEMERAL_RUNNER_SET_FINALIZERS)
            p.log.info("finalizer removed")
            self._forget(p.key)
        return Result()

    def _forget(self, request: Request) -> None:
        self._passes.forget(request)
        if self._metrics is not None:
            self._metrics.forget(request)

    # --- status --------------------------------------------------------------------------------

    async def _write_status(
        self,
        p: Pass,
        children: Children,
        *,
        phase: str,
        extra: JSONDict | None = None,
        coalesce: bool = False,
    ) -> float | None:
        """Write the counts, phase and `extra` when they changed. With `coalesce`, a change of
        counts (and of the cleanup marker) alone within `COUNTS_WINDOW_SECONDS` of the previous
        write is held: the seconds until it may go are returned, and the pass then runs again
        (one write carries every change of the window: docs/reconcilers.md#status-writes)."""
        if self._metrics is not None:
            self._metrics.publish(p.object, children)
        desired = {**counts_status(children), "phase": phase, **(extra or {})}
        marker = p.noted(SetStep.CLEANUP_MARKER)
        if marker is not None and CLEANUP_MARKER not in desired:
            # A cleanup marker held back by an earlier pass goes with this write.
            desired[CLEANUP_MARKER] = marker.value
        if not p.status_due(desired):
            return None
        current = status_of(p.object)
        now = self._now()
        writes = p.memory(StatusWrites)
        if (
            coalesce
            and writes.last is not None
            and current.get("phase") == phase
            and set(extra or {}) <= {CLEANUP_MARKER}
        ):
            held = COUNTS_WINDOW_SECONDS - (now - writes.last).total_seconds()
            if held > 0:
                return held
        await p.write_status(desired)
        writes.last = now
        return None


def _data_drift(current: JSONDict, desired: JSONDict) -> list[str]:
    """A proxy Secret is rewritten only when its data changed (the proxy settings or their
    credentials), as ARC compared it."""
    return ["data"] if current.get("data") != desired.get("data") else []


def setup(manager: Manager, deps: Deps) -> EphemeralRunnerSetReconciler:
    """Add the EphemeralRunnerSet controller to `manager`: sets, and the runners they own."""
    # Registered before the informers run, so the index sees every runner the cache does, each
    # event before the controller's handlers (attached when the manager runs) see it. A
    # runner that appears and goes between two passes of its set (its deletion starting only
    # counted, so deferred) is then not taken for one created and not cached yet.
    children = ChildIndex(observed=deps.expectations.observed)
    manager.informer(EPHEMERAL_RUNNER).add_handler(children)
    reconciler = EphemeralRunnerSetReconciler(
        runner_sets=manager.cache(EPHEMERAL_RUNNER_SET),
        runners=manager.cache(EPHEMERAL_RUNNER),
        scale_sets=manager.cache(AUTOSCALING_RUNNER_SET, reads=("spec",)),
        budgets=manager.cache(POD_DISRUPTION_BUDGET, reads=("spec",)),
        children=children,
        objects=manager.objects,
        deps=deps,
        metrics=RunnerSetMetrics(manager.metrics.metrics.meter),
    )
    manager.add(
        Controller(
            name="ephemeralrunnerset",
            for_=EPHEMERAL_RUNNER_SET,
            reconciler=reconciler,
            predicate=RulePredicate("ephemeralrunnerset-acts", reconciler.wakes_on_update),
            owns=[
                Owns(
                    EPHEMERAL_RUNNER,
                    predicate=ER_TO_ERS,
                    defer=ER_COUNTS,
                    wake_on_delete=reconciler.wakes_on_runner_gone,
                ),
                # Its budget changed or deleted by someone else: the pass puts it back.
                Owns(POD_DISRUPTION_BUDGET, predicate=PDB_TO_ERS),
            ],
            # Every write of a pass is followed by the rest of the pass on the server's answer
            # (runners it creates are expected: `Expectations.unseen`).
            own_writes=frozenset(OwnWrite),
        )
    )
    return reconciler
