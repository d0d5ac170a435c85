"""The EphemeralRunnerSet reconciler: how many runners exist, and which ones go.

Order of a pass (arc-controllers.md 6.2 with the newer upstream rules of appendix B; the
decisions themselves are in runnerset_rules):

1. Read the set from the cache; gone ends the pass (and its gauges).
2. Deletion branch: delete terminated runners, unregister and delete idle ones, let busy ones
   finish; drop the finalizer once no runner is left.
3. Finalizer.
4. A new `spec.actionableRevision`: clean up (terminated and idle runners go, busy ones finish)
   and record `appliedActionableRevision`, resetting `finishedRunnerCleanupPatchID`.
5. Outdated set: clean up only, no scaling.
6. Retire stale Outdated runners; replace failed runners whose backoff ran out, one for one.
7. Scaling under the patch-id protocol: finished runners are cleaned up in a pass of their own
   that records the patch id; scale up (never to fill the gap that cleanup made); scale down
   only under patch id 0, never a busy runner, each victim unregistered before it is deleted.
8. Status: counts by phase, phase, the two appendix-B fields; gauges.

The marker `finishedRunnerCleanupPatchID` is remembered from this process's own status writes:
only the leader writes it, and the cache may not have seen the write when the deletions it caused
come back as events. Upstream re-reads it from the API instead.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from controller.actions_clients import ActionsClients
from controller.events import EventRecorder
from controller.runner_context import RunnerContext, context_for
from controller.runner_metrics import (
    RunnerSetMetrics,
)
from controller.runner_network import proxy_data
from controller.runner_objects import (
    controller_reference,
    new_ephemeral_runner,
    proxy_secret_name,
)
from controller.runner_rules import is_deleting, runner_id, status_int, status_of
from controller.runner_settings import RunnerSettings
from controller.runnerset_rules import (
    Children,
    annotation_int,
    classify,
    cleanup_candidates,
    counts_status,
    desired_phase,
    lineage,
    plan_replacements,
    plan_scaling,
    replacement_due,
    scale_down_candidates,
)
from controller.runtime import (
    ER_TO_ERS,
    REGISTRY,
    Controller,
    LazyObject,
    Manager,
    Owns,
    Request,
    Result,
    Store,
)
from controller.runtime.cache import controller_owner_uid
from controller.status_memory import StatusMemory
from shared.api import EphemeralRunnerSetPhase
from shared.api.names import (
    ANNOTATION_PATCH_ID,
    FINALIZER_EPHEMERAL_RUNNER_SET,
    FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from shared.kube.errors import NotFound
from shared.kube.objects import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET, SECRET, Objects

JSONDict = dict[str, Any]

log = logging.getLogger(__name__)

CREATE_CONCURRENCY = 8


def _spec_int(obj: JSONDict, key: str) -> int:
    value = (obj.get("spec") or {}).get(key)
    return value if isinstance(value, int) else 0


async def _gather_all(aws: Iterable[Awaitable[object]]) -> list[object]:
    """Run all to the end, then raise the first failure: one failed request must not cancel
    the others of the batch mid-flight."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


class Expectations:
    """Writes of this reconciler the cache has not shown yet (controller-runtime's ReplicaSet
    "expectations"): runners created in one pass count, with their patch id, in the next pass
    even before their watch event arrives, and runners deleted count as deleting. Without this a
    pass under patch id 0, or under a new patch id whose runners are not cached yet, creates the
    same runners twice (arc-controllers.md 14.25). An expectation the cache never confirms
    expires after `ttl` seconds."""

    def __init__(self, *, clock: Callable[[], float], ttl: float = 60.0) -> None:
        self._clock = clock
        self._ttl = ttl
        self._created: dict[str, tuple[JSONDict, float]] = {}
        self._deleted: dict[str, float] = {}

    def created(self, runner: JSONDict) -> None:
        self._created[runner["metadata"]["name"]] = (runner, self._clock())

    def deleted(self, runner: JSONDict) -> None:
        self._deleted[str(runner["metadata"].get("uid", ""))] = self._clock()

    def apply(self, cached: list[JSONDict]) -> list[JSONDict]:
        """The cached runners, corrected by the writes the cache has not shown yet."""
        now = self._clock()
        names = {r["metadata"]["name"] for r in cached}
        self._created = {
            name: (obj, at)
            for name, (obj, at) in self._created.items()
            if name not in names and now - at < self._ttl
        }
        live = {str(r["metadata"].get("uid")): r for r in cached if not is_deleting(r)}
        self._deleted = {
            uid: at for uid, at in self._deleted.items() if uid in live and now - at < self._ttl
        }
        out = []
        for runner in cached:
            uid = str(runner["metadata"].get("uid"))
            if uid in self._deleted:
                meta = {**runner["metadata"], "deletionTimestamp": "expected"}
                runner = {**runner, "metadata": meta}
            out.append(runner)
        out.extend(obj for obj, _ in self._created.values())
        return out


class EphemeralRunnerSetReconciler:
    def __init__(
        self,
        *,
        runner_sets: Store,
        runners: Store,
        objects: Objects,
        clients: ActionsClients,
        events: EventRecorder,
        settings: RunnerSettings,
        metrics: RunnerSetMetrics | None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._sets = runner_sets
        self._runners = runners
        self._objects = objects
        self._clients = clients
        self._events = events
        self._settings = settings
        self._replacement = settings.replacement_policy()
        self._metrics = metrics
        self._now = now
        self._markers: dict[str, int] = {}
        self._expectations: dict[str, Expectations] = {}
        self._written = StatusMemory()
        self._uids: dict[Request, str] = {}
        # Bounds the Actions removals and deletes one pass runs at once.
        self._removals = asyncio.Semaphore(CREATE_CONCURRENCY)

    def _expected(self, uid: str) -> Expectations:
        """The set's expectations, created on first use."""
        expected = self._expectations.get(uid)
        if expected is None:
            expected = self._expectations[uid] = Expectations(clock=self._clock)
        return expected

    async def reconcile(self, request: Request) -> Result:
        cached = self._sets.get(request.namespace, request.name)
        if cached is None:
            self._forget(request, self._uids.pop(request, ""))
            return Result()
        runner_set = LazyObject(cached, kind=EPHEMERAL_RUNNER_SET)
        uid = str(cached["metadata"]["uid"])
        self._uids[request] = uid
        expected = self._expected(uid)
        runners = expected.apply(self._runners.owned_by(uid))
        applied = status_int(cached, "appliedActionableRevision")
        children = classify(runners, applied_revision=applied)
        if is_deleting(cached):
            return await self._finalize(runner_set, children)
        finalizers = cached["metadata"].get("finalizers") or []
        if FINALIZER_EPHEMERAL_RUNNER_SET not in finalizers:
            runner_set.mutate()["metadata"]["finalizers"] = [
                *finalizers,
                FINALIZER_EPHEMERAL_RUNNER_SET,
            ]
            await runner_set.write(self._objects, optimistic=True)
        if self._metrics is not None:
            self._metrics.publish(runner_set.object, children)

        revision = _spec_int(cached, "actionableRevision")
        if revision != applied:
            await self._clean_up(runner_set.object, children)
            self._markers[uid] = 0
            await self._write_status(
                runner_set,
                children,
                phase=desired_phase(
                    current=str(status_of(cached).get("phase") or ""),
                    children=classify(runners, applied_revision=revision),
                    revision_advanced=True,
                ),
                extra={"appliedActionableRevision": revision, "finishedRunnerCleanupPatchID": 0},
            )
            return Result()

        phase = desired_phase(
            current=str(status_of(cached).get("phase") or ""),
            children=children,
            revision_advanced=False,
        )
        if phase == EphemeralRunnerSetPhase.OUTDATED:
            await self._clean_up(runner_set.object, children)
            await self._write_status(runner_set, children, phase=phase)
            return Result()

        for stale in children.stale_outdated:
            await self._delete_runner(stale)
        requeue = await self._scale(runner_set, children, phase=phase)
        await self._write_status(runner_set, children, phase=phase)
        return requeue

    # --- scaling -------------------------------------------------------------------------------

    async def _scale(self, runner_set: LazyObject, children: Children, *, phase: str) -> Result:
        obj = runner_set.object
        uid = str(obj["metadata"]["uid"])
        replicas = _spec_int(obj, "replicas")
        patch_id = _spec_int(obj, "patchID")
        due, wait = replacement_due(children.failed, now=self._now(), policy=self._replacement)
        replacements = plan_replacements(replicas=replicas, children=children, due=len(due))
        await self._replace_failed(obj, due, replacements)
        plan = plan_scaling(
            replicas=replicas,
            patch_id=patch_id,
            children=children,
            cleanup_marker=self._markers.get(uid, status_int(obj, "finishedRunnerCleanupPatchID")),
            retired_failed=len(due),
            replacements=replacements,
        )
        result = Result(requeue_after=wait.total_seconds()) if wait is not None else Result()
        if plan is None:
            return result
        if plan.cleanup_finished:
            self._markers[uid] = patch_id
            await self._write_status(
                runner_set,
                children,
                phase=phase,
                extra={"finishedRunnerCleanupPatchID": patch_id},
            )
            for finished in children.finished:
                await self._delete_runner(finished)
            return result
        if plan.create:
            await self._create_runners(obj, count=plan.create, patch_id=patch_id)
        if plan.scale_down:
            await self._scale_down(obj, children, count=plan.scale_down)
        return result

    async def _create_runners(
        self, runner_set: JSONDict, *, count: int, patch_id: int, lineage_of: int = 0
    ) -> None:
        body = new_ephemeral_runner(
            runner_set,
            patch_id=patch_id,
            revision=status_int(runner_set, "appliedActionableRevision"),
            lineage=lineage_of,
            excluded_prefixes=self._settings.exclude_label_propagation_prefixes,
        )
        namespace = runner_set["metadata"]["namespace"]
        expected = self._expected(str(runner_set["metadata"]["uid"]))
        spec = (runner_set.get("spec") or {}).get("ephemeralRunnerSpec") or {}
        if spec.get("proxy"):
            await self._ensure_proxy_secret(runner_set, spec["proxy"])
        limit = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create() -> None:
            async with limit:
                created = await self._objects.create(EPHEMERAL_RUNNER, namespace, body)
            expected.created(created)

        await _gather_all(create() for _ in range(count))

    async def _ensure_proxy_secret(self, runner_set: JSONDict, proxy: JSONDict) -> None:
        """The Secret runner pods read their proxy variables from (arc-controllers.md 9.5),
        brought up to date before runners are created (ARC read it on every pass)."""
        meta = runner_set["metadata"]
        name = proxy_secret_name(set_name=meta["name"], namespace=meta["namespace"])
        data = {
            k: base64.b64encode(v.encode()).decode()
            for k, v in (await proxy_data(self._objects, meta["namespace"], proxy)).items()
        }
        labels = meta.get("labels") or {}
        body: JSONDict = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {
                    k: labels[k]
                    for k in (LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE)
                    if k in labels
                },
                "ownerReferences": [controller_reference(runner_set)],
            },
            "data": data,
        }
        try:
            current = await self._objects.get(SECRET, meta["namespace"], name)
        except NotFound:
            await self._objects.create(SECRET, meta["namespace"], body)
            return
        if current.get("data") != data:
            body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            await self._objects.replace(SECRET, meta["namespace"], body)

    async def _replace_failed(
        self, runner_set: JSONDict, due: list[JSONDict], replacements: int
    ) -> None:
        for index, failed in enumerate(due):
            if index < replacements:
                await self._create_runners(
                    runner_set,
                    count=1,
                    patch_id=annotation_int(failed, ANNOTATION_PATCH_ID) or 0,
                    lineage_of=lineage(failed) + 1,
                )
            reason = status_of(failed).get("reason") or "Failed"
            await self._events.warning(
                runner_set,
                reason="ReplacingFailedRunner",
                message=f"Runner {failed['metadata']['name']} failed ({reason}); replacing it",
            )
            if self._metrics is not None:
                self._metrics.replaced_failed.add(
                    1, {"namespace": runner_set["metadata"]["namespace"]}
                )
            await self._delete_runner(failed)

    async def _scale_down(self, runner_set: JSONDict, children: Children, *, count: int) -> None:
        """Retire `count` victims in candidate order; a victim that took a job meanwhile (or
        could not be unregistered) is replaced by the next candidate, in parallel batches."""
        candidates = scale_down_candidates(children)
        removed, start = 0, 0
        errors: list[BaseException] = []
        while removed < count and start < len(candidates):
            batch = candidates[start : start + count - removed]
            start += len(batch)
            results = await asyncio.gather(
                *(self._retire(victim) for victim in batch), return_exceptions=True
            )
            removed += sum(1 for r in results if r is True)
            errors += [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _retire(self, runner: JSONDict) -> bool:
        """Unregister an idle runner, then delete it; False when it took a job meanwhile."""
        async with self._removals:
            if not await self._unregister(runner):
                return False
            await self._delete_runner(runner)
            return True

    async def _unregister(self, runner: JSONDict) -> bool:
        """Remove an idle runner from the service; False when it took a job meanwhile."""
        rid = runner_id(runner)
        if rid == 0:
            return True
        namespace = runner["metadata"]["namespace"]
        return await self._clients.remove_runner(namespace, runner.get("spec") or {}, rid)

    async def _delete_runner(self, runner: JSONDict) -> None:
        meta = runner["metadata"]
        owner = controller_owner_uid(runner)
        if owner is not None:
            self._expected(owner).deleted(runner)
        with contextlib.suppress(NotFound):
            await self._objects.delete(
                EPHEMERAL_RUNNER, meta["namespace"], meta["name"], uid=meta.get("uid")
            )

    # --- cleanup and deletion --------------------------------------------------------------------

    async def _clean_up(self, runner_set: JSONDict, children: Children) -> None:
        """Terminated runners go; idle ones are unregistered and go; busy ones finish."""
        for runner in children.terminated:
            await self._delete_runner(runner)
        await _gather_all(self._retire(runner) for runner in cleanup_candidates(children))

    async def _finalize(self, runner_set: LazyObject, children: Children) -> Result:
        obj = runner_set.object
        finalizers = obj["metadata"].get("finalizers") or []
        ours = {FINALIZER_EPHEMERAL_RUNNER_SET, FINALIZER_EPHEMERAL_RUNNER_SET_LEGACY}
        if not ours & set(finalizers):
            return Result()
        live = children.pending + children.running + children.terminated + children.deleting
        if live:
            await self._clean_up(obj, children)
            return Result()
        runner_set.mutate()["metadata"]["finalizers"] = [f for f in finalizers if f not in ours]
        with contextlib.suppress(NotFound):
            await runner_set.write(self._objects, optimistic=True)
        self._forget(Request.of(obj), str(obj["metadata"]["uid"]))
        return Result()

    def _forget(self, request: Request, uid: str) -> None:
        self._markers.pop(uid, None)
        self._expectations.pop(uid, None)
        self._written.forget(uid)
        if self._metrics is not None:
            self._metrics.forget(request)

    # --- status --------------------------------------------------------------------------------

    async def _write_status(
        self,
        runner_set: LazyObject,
        children: Children,
        *,
        phase: str,
        extra: JSONDict | None = None,
    ) -> None:
        desired = {**counts_status(children), "phase": phase, **(extra or {})}
        current = status_of(runner_set.object)
        if all(current.get(k) == v for k, v in desired.items()):
            return
        uid = str(runner_set.object["metadata"]["uid"])
        if self._written.redundant(uid, current=current, desired=desired):
            return
        runner_set.mutate().setdefault("status", {}).update(desired)
        await runner_set.write(self._objects)
        self._written.wrote(uid, current=current, desired=desired)


def install(manager: Manager, context: RunnerContext) -> EphemeralRunnerSetReconciler:
    reconciler = EphemeralRunnerSetReconciler(
        runner_sets=manager.cache(EPHEMERAL_RUNNER_SET),
        runners=manager.cache(EPHEMERAL_RUNNER),
        objects=manager.objects,
        clients=context.clients,
        events=context.events,
        settings=context.settings,
        metrics=context.metrics,
    )
    manager.add(
        Controller(
            name="ephemeralrunnerset",
            for_=EPHEMERAL_RUNNER_SET,
            reconciler=reconciler,
            owns=[Owns(EPHEMERAL_RUNNER, predicate=ER_TO_ERS)],
        )
    )
    return reconciler


@REGISTRY.register
def setup(manager: Manager) -> None:
    install(manager, context_for(manager))
