"""The AutoscalingRunnerSet reconciler: a scale set on GitHub, its EphemeralRunnerSet, and its
listener (docs/autoscaling.md).

A pass observes the set, its children as the caches show them and what this process last wrote,
asks `rules.plan` what to do (the order of a pass is in `rules.py`), and applies the plan: every
write through the pass, one log line naming each decision. GitHub is asked in the middle: a plan
that needs its answer stops at the question, and the pass plans again with the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import assert_never

from controller.autoscalingrunnerset import rules
from controller.autoscalingrunnerset.metrics import ScaleSetMetrics
from controller.autoscalingrunnerset.objects import listener_name
from controller.autoscalingrunnerset.predicates import ERS_COUNTS, ERS_TO_ARS
from controller.autoscalingrunnerset.rules import (
    Answer,
    Ask,
    Checked,
    Failed,
    Missing,
    Observed,
    Plan,
    Recorded,
    SetMemory,
)
from controller.deps import Deps
from controller.github.clients import ActionsClients, GitHubConfigError
from controller.github.scalesets import ScaleSets
from controller.runtime import (
    Controller,
    EventRecorder,
    Expectations,
    LazyObject,
    Manager,
    Owns,
    OwnWrite,
    Pass,
    Passes,
    Request,
    Result,
    Store,
    Watches,
    add_finalizers,
    remove_finalizers,
)
from controller.runtime.passes import deep_merge
from controller.runtime.plans import AddFinalizer, RemoveFinalizer, Settle, Warn
from controller.settings import AutoscalingSettings
from shared.actions.errors import ActionsError, ScaleSetNotFound
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from shared.api.names import (
    ANNOTATION_RUNNER_SCALE_SET_ID,
    FINALIZER_AUTOSCALING_RUNNER_SET,
    FINALIZER_CLEANUP_PROTECTION,
)
from shared.kube.errors import Forbidden, KubeError
from shared.kube.objects import Kind, Objects
from shared.kube.views import annotation_int, metadata_of
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


def _listener_key(listener: JSONDict) -> Iterable[Request]:
    spec = listener.get("spec") or {}
    namespace, name = (
        spec.get("autoscalingRunnerSetNamespace"),
        spec.get("autoscalingRunnerSetName"),
    )
    return (Request(str(namespace), str(name)),) if namespace and name else ()


def _names_set(listener: JSONDict, ars: JSONDict) -> bool:
    spec, meta = listener.get("spec") or {}, metadata_of(ars)
    return (
        spec.get("autoscalingRunnerSetNamespace") == meta["namespace"]
        and spec.get("autoscalingRunnerSetName") == meta["name"]
    )


class AutoscalingRunnerSetReconciler:
    def __init__(
        self,
        *,
        sets: Store,
        runner_sets: Store,
        listeners: Store,
        objects: Objects,
        clients: ActionsClients,
        events: EventRecorder,
        settings: AutoscalingSettings,
        expectations: Expectations,
        metrics: ScaleSetMetrics | None = None,
    ) -> None:
        self._runner_sets = runner_sets
        self._metrics = metrics
        self._listeners = listeners
        self._scale_sets = ScaleSets(clients)
        self._events = events
        self._settings = settings
        self._passes = Passes(
            kind=AUTOSCALING_RUNNER_SET,
            store=sets,
            expectations=expectations,
            objects=objects,
            events=events,
            logger=log,
        )

    async def reconcile(self, request: Request) -> Result:
        p = self._passes.begin(request)
        if p is None:
            return Result()
        observed = self._observe(p)
        plan = rules.plan(observed)
        if plan.ask is not None:
            # Planned again with GitHub's answer: what the set records, or why it cannot.
            plan = rules.plan(replace(observed, github=await self._ask(p, plan.ask)))
        return await self._apply(p, plan)

    def _observe(self, p: Pass) -> Observed:
        ars, remembered = p.object, p.recalled(SetMemory)
        return Observed(
            set=ars,
            runner_sets=tuple(self._runner_sets.owned_by(p.uid)),
            listeners=tuple(
                listener for listener in self._listeners.list() if _names_set(listener, ars)
            ),
            named_listener=self._listeners.get(
                self._settings.controller_namespace, listener_name(ars)
            ),
            conditions=dict(remembered.conditions) if remembered is not None else {},
            settings=self._settings,
            now=datetime.now(UTC),
        )

    async def _ask(self, p: Pass, ask: Ask) -> Answer:
        """GitHub's answer to the plan's question (docs/autoscaling.md#plan-then-apply)."""
        obj = p.object
        scale_set_id = annotation_int(obj, ANNOTATION_RUNNER_SCALE_SET_ID) or 0
        spec = obj.get("spec") or {}
        try:
            await self._scale_sets.check_config(obj)
            match ask:
                case Ask.REGISTER:
                    return Recorded(await self._scale_sets.find_or_register(obj))
                case Ask.MOVE:
                    group = str(spec.get("runnerGroup") or "")
                    return Recorded(await self._scale_sets.move_to_group(obj, scale_set_id, group))
                case Ask.RENAME:
                    name = str(spec["runnerScaleSetName"])
                    return Recorded(await self._scale_sets.rename(obj, scale_set_id, name))
                case Ask.VERIFY:
                    await self._scale_sets.check(obj, scale_set_id)
        except ScaleSetNotFound:
            return Missing()
        except (ActionsError, KubeError, GitHubConfigError) as exc:
            return Failed(exc)
        return Checked()

    async def _apply(self, p: Pass, plan: Plan) -> Result:
        if plan.why:
            p.log.info("plan: %s", plan.describe())
        edits = plan.edits
        for step in plan.steps:
            match step:
                case AddFinalizer():
                    await add_finalizers(p.lazy, p.objects, [FINALIZER_AUTOSCALING_RUNNER_SET])
                case RemoveFinalizer():
                    await remove_finalizers(p.lazy, p.objects, [FINALIZER_AUTOSCALING_RUNNER_SET])
                case rules.WriteSet():
                    self._edit(p, edits)
                    await p.write()
                    self._remember(p, plan, edits)
                    edits = {}
                case rules.WriteStatus(desired):
                    self._edit(p, edits)
                    if not await p.write_status(desired):
                        # The set's other edits (conditions, annotations) go on their own.
                        await p.write()
                    self._remember(p, plan, edits)
                    edits = {}
                case Warn(reason, message, subject):
                    await p.warn(reason, message, subject=subject)
                case Settle(reason):
                    p.settle(reason)
                case rules.Announce(reason, message):
                    await p.event(reason, message)
                case rules.Create(kind, desired):
                    # A create that the cache has not shown yet is not made twice.
                    await p.ensure(kind, desired, None)
                case rules.Delete(kind, target):
                    await p.delete(kind, target)
                case rules.UpdateRunnerSet(target, labels, annotations, spec):
                    await self._update_runner_set(p, target, labels, annotations, spec)
                case rules.Patch(kind, target, spec):
                    meta = metadata_of(target)
                    desired = {"metadata": {"name": meta["name"], "namespace": meta["namespace"]}}
                    await p.ensure(kind, {**desired, "spec": spec}, target)
                case rules.DeleteScaleSet(scale_set_id, name):
                    await self._delete_scale_set(p, scale_set_id, name)
                case rules.StripCleanupProtection(kind, namespace, name):
                    await self._strip_cleanup_protection(p, kind, namespace, name)
                case _:
                    assert_never(step)
        if plan.error is not None:
            raise plan.error
        return Result(requeue_after=plan.requeue_after)

    @staticmethod
    def _edit(p: Pass, edits: JSONDict) -> None:
        if edits:
            deep_merge(p.mutate(), edits)

    @staticmethod
    def _remember(p: Pass, plan: Plan, edits: JSONDict) -> None:
        """The conditions the write carried are what this process last wrote."""
        if plan.memory is not None and "status" in edits:
            p.memory(SetMemory).conditions = dict(plan.memory)

    @staticmethod
    async def _update_runner_set(
        p: Pass, target: JSONDict, labels: JSONDict, annotations: JSONDict, spec: JSONDict
    ) -> None:
        # Optimistic: a revision advanced on a set this pass read is never advanced again on a
        # newer one (a Conflict requeues the pass), and the runner spec's removed keys go with
        # the diff from what was read.
        meta = metadata_of(target)
        desired: JSONDict = {
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }
        await p.ensure(EPHEMERAL_RUNNER_SET, desired, target, optimistic=True)

    async def _delete_scale_set(self, p: Pass, scale_set_id: int, name: str) -> None:
        """A scale set left on GitHub is said at WARNING in the log whether or not the Event
        lands (a terminating namespace refuses it), and counted."""
        try:
            await self._scale_sets.delete(p.object, scale_set_id)
        except rules.NO_CREDENTIALS as exc:
            message = rules.left_on_github(scale_set_id, name, exc)
            if await p.warn(rules.WARN_LEFT_ON_GITHUB, message) and self._metrics is not None:
                self._metrics.left_behind(p.object)

    @staticmethod
    async def _strip_cleanup_protection(p: Pass, kind: Kind, namespace: str, name: str) -> None:
        try:
            obj = await p.read(kind, namespace, name)
        except Forbidden:
            if kind.kind == "Secret":  # ARC's rule: a Secret we may not read counts as gone
                return
            raise
        if obj is not None:
            await remove_finalizers(
                LazyObject(obj, kind=kind), p.objects, [FINALIZER_CLEANUP_PROTECTION]
            )


def setup(manager: Manager, deps: Deps) -> AutoscalingRunnerSetReconciler:
    """Add the AutoscalingRunnerSet controller to `manager`: sets, the runner sets they own, and
    their listeners (mapped back by spec: no owner reference crosses namespaces)."""
    if deps.autoscaling is None:
        raise ValueError("the AutoscalingRunnerSet reconciler needs in-cluster settings")
    reconciler = AutoscalingRunnerSetReconciler(
        sets=manager.cache(AUTOSCALING_RUNNER_SET),
        runner_sets=manager.cache(EPHEMERAL_RUNNER_SET),
        listeners=manager.cache(AUTOSCALING_LISTENER),
        objects=manager.objects,
        clients=deps.clients,
        events=deps.events,
        settings=deps.autoscaling,
        expectations=deps.expectations,
        metrics=ScaleSetMetrics(manager.metrics.metrics.meter),
    )
    manager.add(
        Controller(
            name="autoscalingrunnerset",
            for_=AUTOSCALING_RUNNER_SET,
            reconciler=reconciler,
            owns=[Owns(EPHEMERAL_RUNNER_SET, predicate=ERS_TO_ARS, defer=ERS_COUNTS)],
            # Its status write ends a pass; its other writes are continued by their echo.
            own_writes=frozenset({OwnWrite.STATUS}),
            watches=[Watches(AUTOSCALING_LISTENER, map=_listener_key)],
        )
    )
    return reconciler
