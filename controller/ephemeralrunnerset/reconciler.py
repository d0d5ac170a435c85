"""The EphemeralRunnerSet reconciler: how many runners exist, and which ones go.

Order of a pass (ARC's with the newer upstream rules, docs/reconcilers.md#ephemeralrunnerset;
the decisions themselves are in `rules.py`):

1. Read the set from the cache; gone ends the pass (and its gauges).
2. Deletion branch: delete terminated runners, unregister and delete idle ones, let busy ones
   finish; drop the finalizer once no runner is left.
3. Finalizer, in one write with the runner spec's hash and, for a set no AutoscalingRunnerSet
   controls whose runner spec changed, an advanced `spec.actionableRevision`.
4. A `spec.actionableRevision` above `appliedActionableRevision`: clean up (terminated and idle
   runners go, busy ones finish) and record `appliedActionableRevision`, resetting
   `finishedRunnerCleanupPatchID`.
5. Outdated set: clean up only, no scaling.
6. Retire stale Outdated runners; replace failed runners whose backoff ran out, one for one.
7. Scaling under the patch-id protocol: finished runners are cleaned up in a pass of their own
   that records the patch id; scale up (never to fill the gap that cleanup made); scale down
   only under patch id 0, never a busy runner, each victim unregistered before it is deleted.
8. Status: counts by phase, phase, `appliedActionableRevision` and
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
from datetime import UTC, datetime
from enum import Enum

from controller.deps import Deps
from controller.ephemeralrunnerset.children import ChildIndex
from controller.ephemeralrunnerset.metrics import RunnerSetMetrics
from controller.ephemeralrunnerset.objects import new_ephemeral_runner, proxy_secret
from controller.ephemeralrunnerset.predicates import COUNTS_WINDOW_SECONDS, ER_COUNTS, ER_TO_ERS
from controller.ephemeralrunnerset.rules import (
    Children,
    bounded_replicas,
    cleanup_candidates,
    counts_status,
    desired_phase,
    lineage,
    only_listener_fields_changed,
    owner_max_runners,
    plan_replacements,
    plan_scaling,
    replacement_due,
    scale_down_candidates,
    scaling_is_no_op,
    track_runner_spec,
)
from controller.github.clients import REASON_INVALID_NAME
from controller.github.network import proxy_data
from controller.github.runners import RunnerStep
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH, proxy_secret_name
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
    has_any_finalizer,
    remove_finalizers,
)
from controller.runtime.cache import controller_owner
from shared.api import EphemeralRunnerSetPhase, patchid
from shared.api.kinds import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.api.names import (
    ANNOTATION_PATCH_ID,
    EPHEMERAL_RUNNER_SET_FINALIZERS,
    FINALIZER_EPHEMERAL_RUNNER_SET,
)
from shared.api.references import runner_spec_name_problems
from shared.api.views import runner_id, runner_set_status
from shared.kube.errors import Conflict, NotFound
from shared.kube.objects import SECRET, Objects
from shared.kube.views import (
    annotation_int,
    is_deleting,
    spec_int,
    status_int,
    status_of,
    uid_of,
)
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

CREATE_CONCURRENCY = 8
CLEANUP_MARKER = patchid.CLEANUP_MARKER_FIELD


class SetStep(Enum):
    """The expectations steps of a set's passes."""

    CLEANUP_MARKER = "cleanup marker"
    """The `finishedRunnerCleanupPatchID` last written (or held back to go with the counts)."""


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
        self._children = children
        self._objects = objects
        self._deps = deps
        self._events = deps.events
        self._settings = deps.settings
        self._replacement = deps.settings.replacement_policy()
        # Runners created and deleted that the cache has not shown yet (without them a pass under
        # patch id 0, or under a new patch id whose runners are not cached yet, creates the same
        # runners twice: docs/reconcilers.md#expectations), status values written, the cleanup
        # marker, and which runners were unregistered: each set's `Recall`, through the pass.
        self._passes = Passes(
            kind=EPHEMERAL_RUNNER_SET,
            store=runner_sets,
            expectations=deps.expectations,
            objects=objects,
            logger=log,
        )
        self._metrics = metrics
        self._now = now
        # Bounds the Actions removals and deletes one pass runs at once.
        self._removals = asyncio.Semaphore(CREATE_CONCURRENCY)
        # When this process last wrote each set's status, to coalesce count writes.
        self._status_written: dict[Request, datetime] = {}

    def wakes_on_update(self, old: JSONDict, new: JSONDict) -> bool:
        """The set's update predicate: False for a patch of replicas and patch id alone (the
        listener's) when a pass over the new set would do nothing (`_acts`). Measured:
        docs/reconcilers.md#wakes-per-runner."""
        return not only_listener_fields_changed(old, new) or self._acts(new)

    def wakes_on_runner_gone(self, runner: JSONDict) -> bool:
        """Whether a runner's delete event wakes its set: not when the runner was being deleted
        already (it was in no count, so the status does not change) and a pass over the set
        would do nothing now that it is gone (`_acts`), as when the listener's count went down
        before the runner went. The index is an earlier handler of the same informer: a runner
        it still holds has not gone for it, and wakes the set."""
        if not is_deleting(runner) or Request.of(runner) in self._children:
            return True
        owner = controller_owner(runner)
        if owner is None or owner.get("kind") != EPHEMERAL_RUNNER_SET.kind:
            return True
        runner_set = self._sets.get(Request.of(runner).namespace, str(owner.get("name")))
        return runner_set is None or self._acts(runner_set)

    def _acts(self, runner_set: JSONDict) -> bool:
        """Whether a pass over `runner_set` would do anything (`rules.scaling_is_no_op`), judged
        on the runner index and on what this process created and deleted that the cache does
        not show yet, as a pass judges. (A pass running on the set decided on what it read then:
        the runtime wakes it again whatever this says.)"""
        request = Request.of(runner_set)
        if is_deleting(runner_set) or not has_any_finalizer(
            runner_set, [FINALIZER_EPHEMERAL_RUNNER_SET]
        ):
            return True
        memory = self._passes.recall(runner_set)
        unseen = memory.unseen(lambda name: self._runners.get(request.namespace, name))
        applied = status_int(runner_set, "appliedActionableRevision")
        children = self._children.children(memory.uid, applied_revision=applied, unseen=unseen)
        if track_runner_spec(runner_set, children) is not None:
            return True
        marker = self._cleanup_marker(memory, runner_set)
        return not scaling_is_no_op(runner_set, children, cleanup_marker=marker)

    async def reconcile(self, request: Request) -> Result:
        p = self._passes.begin(request)
        if p is None:
            self._forget(request)
            return Result()
        runner_set, uid, cached = p.lazy, p.uid, p.object

        def current(revision: int) -> Children:
            """The runners as cached, with what this process did that the cache does not show
            yet (its own writes' echoes wake nothing, so a pass goes on with this)."""
            unseen = p.unseen(lambda name: self._runners.get(request.namespace, name))
            return self._children.children(uid, applied_revision=revision, unseen=unseen)

        applied = status_int(cached, "appliedActionableRevision")
        children = current(applied)
        if is_deleting(cached):
            return await self._finalize(p, children)
        self._track_runner_spec(runner_set, children)
        try:
            await add_finalizers(runner_set, self._objects, [FINALIZER_EPHEMERAL_RUNNER_SET])
            if runner_set.copied:
                await runner_set.write(self._objects, optimistic=True)
        except Conflict:
            # Decided on a copy the API has moved past (a listener patch, or this process's
            # own write the cache has not shown): the watch event of the newer copy comes back.
            return Result()
        cached = runner_set.object

        revision = spec_int(cached, "actionableRevision")
        if revision > applied:
            await self._clean_up(p, children)
            p.note(SetStep.CLEANUP_MARKER, 0)
            await self._write_status(
                p,
                children,
                phase=desired_phase(
                    current=str(runner_set_status(cached).get("phase") or ""),
                    children=current(revision),
                    revision_advanced=True,
                ),
                extra={"appliedActionableRevision": revision, CLEANUP_MARKER: 0},
            )
            # The pass goes on as the one its echo woke used to, on the revision now applied.
            cached, applied = runner_set.object, revision
            children = current(applied)

        phase = desired_phase(
            current=str(runner_set_status(cached).get("phase") or ""),
            children=children,
            revision_advanced=False,
        )
        if phase == EphemeralRunnerSetPhase.OUTDATED:
            await self._clean_up(p, children)
            await self._write_status(p, children, phase=phase)
            return Result()

        for stale in children.stale_outdated:
            await p.delete(EPHEMERAL_RUNNER, stale)
        requeue = await self._scale(
            p,
            children,
            phase=phase,
            refresh=lambda: current(applied),
        )
        # The status counts what this pass created and deleted too.
        held = await self._write_status(p, current(applied), phase=phase, coalesce=True)
        return requeue.sooner(held)

    def _track_runner_spec(self, runner_set: LazyObject, children: Children) -> None:
        """Stage the runner spec's hash and an advanced revision (docs/reconcilers.md#revisions);
        the finalizer's write, or the one after it, sends them."""
        tracked = track_runner_spec(runner_set.object, children)
        if tracked is None:
            return
        obj = runner_set.mutate()
        obj["metadata"].setdefault("annotations", {})[ANNOTATION_RUNNER_SPEC_HASH] = (
            tracked.spec_hash
        )
        if tracked.revision is not None:
            obj.setdefault("spec", {})["actionableRevision"] = tracked.revision

    # --- scaling -------------------------------------------------------------------------------

    async def _scale(
        self,
        p: Pass,
        children: Children,
        *,
        phase: str,
        refresh: Callable[[], Children],
    ) -> Result:
        obj = p.object
        written = spec_int(obj, "replicas")
        max_runners = owner_max_runners(obj, self._scale_sets.get)
        replicas = bounded_replicas(written, max_runners)
        if replicas != written:
            p.log.warning(
                "replicas=%d is above the AutoscalingRunnerSet's maxRunners=%d: running at most %d",
                written,
                max_runners,
                replicas,
            )
        patch_id = spec_int(obj, patchid.SPEC_FIELD)
        due, wait = replacement_due(children.failed, now=self._now(), policy=self._replacement)
        replacements = plan_replacements(replicas=replicas, children=children, due=len(due))
        await self._replace_failed(p, due, replacements)
        plan = plan_scaling(
            replicas=replicas,
            patch_id=patch_id,
            children=children,
            cleanup_marker=self._cleanup_marker(p, p.object),
            retired_failed=len(due),
            replacements=replacements,
        )
        result = Result(requeue_after=wait.total_seconds()) if wait is not None else Result()
        if plan is None:
            return result
        if plan.cleanup_finished:
            p.note(SetStep.CLEANUP_MARKER, patch_id)
            # Held with the counts: until written, the note is what this process reads.
            held = await self._write_status(
                p,
                children,
                phase=phase,
                extra={CLEANUP_MARKER: patch_id},
                coalesce=True,
            )
            result = result.sooner(held)
            p.log.info(
                "cleaning up %d finished runner(s) under patch id %d",
                len(children.finished),
                patch_id,
            )
            for finished in children.finished:
                await p.delete(EPHEMERAL_RUNNER, finished)
            # The pass goes on as the one its echo woke used to, with the finished runners
            # deleting: under this patch id that plan only says why it does not scale up.
            plan = plan_scaling(
                replicas=replicas,
                patch_id=patch_id,
                children=refresh(),
                cleanup_marker=patch_id,
            )
            if plan is None or plan.cleanup_finished:
                return result
        if plan.suppressed_by_cleanup:
            p.log.info(
                "no scale-up to %d under patch id %d: the gap was made by cleaning up "
                "finished runners, not by new demand",
                replicas,
                patch_id,
            )
        if plan.create:
            p.log.info(
                "creating %d runner(s) for replicas=%d patchID=%d",
                plan.create,
                replicas,
                patch_id,
            )
            await self._create_runners(p, count=plan.create, patch_id=patch_id)
        if plan.scale_down:
            p.log.info(
                "scaling down by %d idle runner(s) to replicas=%d",
                plan.scale_down,
                replicas,
            )
            await self._scale_down(p, children, count=plan.scale_down)
        return result

    @staticmethod
    def _cleanup_marker(memory: Recall, runner_set: JSONDict) -> int:
        """`finishedRunnerCleanupPatchID` as this process last wrote it, else as cached."""
        note = memory.noted(SetStep.CLEANUP_MARKER)
        if note is not None and isinstance(note.value, int):
            return note.value
        return status_int(runner_set, CLEANUP_MARKER)

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
            message = "; ".join(problems)
            p.log.warning("no runner made: %s", message)
            await self._events.warning(runner_set, reason=REASON_INVALID_NAME, message=message)
            return
        if spec.get("proxy"):
            await self._ensure_proxy_secret(runner_set, spec["proxy"])
        limit = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create() -> None:
            async with limit:
                created = await self._objects.create(EPHEMERAL_RUNNER, namespace, body)
            p.created(created)
            p.about(uid_of(created)).note(RunnerStep.CREATED_WITHOUT_SECRET)

        await _gather_all(create() for _ in range(count))

    async def _ensure_proxy_secret(self, runner_set: JSONDict, proxy: JSONDict) -> None:
        """The Secret runner pods read their proxy variables from, brought up to date before
        runners are created (ARC read it on every pass)."""
        meta = runner_set["metadata"]
        name = proxy_secret_name(set_name=meta["name"], namespace=meta["namespace"])
        data = {
            k: base64.b64encode(v.encode()).decode()
            for k, v in (await proxy_data(self._objects, meta["namespace"], proxy)).items()
        }
        body = proxy_secret(runner_set, data)
        try:
            current = await self._objects.get(SECRET, meta["namespace"], name)
        except NotFound:
            await self._objects.create(SECRET, meta["namespace"], body)
            return
        if current.get("data") != data:
            body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            await self._objects.replace(SECRET, meta["namespace"], body)

    async def _replace_failed(self, p: Pass, due: list[JSONDict], replacements: int) -> None:
        runner_set = p.object
        for index, failed in enumerate(due):
            if index < replacements:
                await self._create_runners(
                    p,
                    count=1,
                    patch_id=annotation_int(failed, ANNOTATION_PATCH_ID) or 0,
                    lineage_of=lineage(failed) + 1,
                )
            reason = status_of(failed).get("reason") or "Failed"
            p.log.info("replacing failed runner %s (%s)", failed["metadata"]["name"], reason)
            await self._events.warning(
                runner_set,
                reason="ReplacingFailedRunner",
                message=f"Runner {failed['metadata']['name']} failed ({reason}); replacing it",
            )
            if self._metrics is not None:
                self._metrics.replaced_failed.add(
                    1, {"namespace": runner_set["metadata"]["namespace"]}
                )
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
            if not await self._unregister(p, runner):
                return False
            await p.delete(EPHEMERAL_RUNNER, runner)
            return True

    async def _unregister(self, p: Pass, runner: JSONDict) -> bool:
        """Remove an idle runner from the service; False when it took a job meanwhile."""
        rid = runner_id(runner)
        return rid == 0 or await self._deps.runners.unregister(runner, rid, p.about(uid_of(runner)))

    # --- cleanup and deletion --------------------------------------------------------------------

    async def _clean_up(self, p: Pass, children: Children) -> None:
        """Terminated runners go; idle ones are unregistered and go; busy ones finish."""
        for runner in children.terminated:
            await p.delete(EPHEMERAL_RUNNER, runner)
        await _gather_all(self._retire(p, runner) for runner in cleanup_candidates(children))

    async def _finalize(self, p: Pass, children: Children) -> Result:
        obj = p.object
        if not has_any_finalizer(obj, EPHEMERAL_RUNNER_SET_FINALIZERS):
            return Result()
        live = children.pending + children.running + children.terminated + children.deleting
        if live:
            await self._clean_up(p, children)
            return Result()
        await remove_finalizers(p.lazy, self._objects, EPHEMERAL_RUNNER_SET_FINALIZERS)
        p.log.info("finalizer removed")
        self._forget(p.key)
        return Result()

    def _forget(self, request: Request) -> None:
        self._status_written.pop(request, None)
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
        key = p.key
        last = self._status_written.get(key)
        if (
            coalesce
            and last is not None
            and current.get("phase") == phase
            and set(extra or {}) <= {CLEANUP_MARKER}
        ):
            held = COUNTS_WINDOW_SECONDS - (now - last).total_seconds()
            if held > 0:
                return held
        await p.write_status(desired)
        self._status_written[key] = now
        return None


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
                )
            ],
            # Every write of a pass is followed by the rest of the pass on the server's answer
            # (runners it creates are expected: `Expectations.unseen`).
            own_writes=frozenset(OwnWrite),
        )
    )
    return reconciler
