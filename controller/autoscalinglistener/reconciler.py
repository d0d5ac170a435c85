"""The AutoscalingListener reconciler: one listener pod per scale set (more with standby
replicas, docs/autoscaling.md#listener-standby), with exactly the permissions it needs
(docs/autoscaling.md#autoscalinglistener).

A pass observes (the listener, its set and its pods from the caches, what this process
remembers of it, the time), plans (`rules.plan`, pure: what to do, in order, and why) and
applies the plan through the pass: children ensured, objects deleted, warnings said once.
What the API holds of the children (the Role and RoleBinding as stored, the GitHub Secret, the
CA, the proxy credentials) is read only when the plan gets that far.

ServiceAccount, Role, RoleBinding, Secrets and the Lease are read through the API, not a cache:
a listener is reconciled on its own and its pods' events only, a few times in its life, and the
controller then needs no cluster-wide watch of Secrets, Roles, RoleBindings or Leases.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from opentelemetry.metrics import Meter

from controller.autoscalinglistener.group import Group, group_members, group_of
from controller.autoscalinglistener.metrics import RunningListeners
from controller.autoscalinglistener.rules import (
    REASON_CANNOT_DELETE,
    REASON_POD_REFUSED,
    WAIT,
    Child,
    CreatePod,
    Delete,
    DeleteChild,
    DeleteSelf,
    Ensure,
    Inputs,
    ListenerMemory,
    ListenerStep,
    NoteForeign,
    Observed,
    Plan,
    plan,
    pods_by_replica,
)
from controller.deps import Deps
from controller.github.credentials import secret_credentials
from controller.github.network import proxy_data, root_ca
from controller.runtime import (
    Controller,
    Deleted,
    EventRecorder,
    Expectations,
    Manager,
    Owns,
    Pass,
    Passes,
    Request,
    Result,
    Store,
    Watches,
    add_finalizers,
    remove_finalizers,
)
from controller.runtime.plans import AddFinalizer, RemoveFinalizer, Settle, Warn
from controller.settings import ListenerSettings
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.api.names import FINALIZER_AUTOSCALING_LISTENER, LABEL_LISTENER_GROUP
from shared.kube.errors import Forbidden, KubeError, NamespaceTerminating
from shared.kube.objects import POD, ROLE, ROLE_BINDING, SECRET, Objects
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


class AutoscalingListenerReconciler:
    def __init__(
        self,
        *,
        listeners: Store,
        sets: Store,
        pods: Store,
        objects: Objects,
        events: EventRecorder,
        expectations: Expectations,
        settings: ListenerSettings,
        meter: Meter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._passes = Passes(
            kind=AUTOSCALING_LISTENER,
            store=listeners,
            expectations=expectations,
            objects=objects,
            logger=log,
            events=events,
        )
        self._listeners = listeners
        self._sets = sets
        self._pods = pods
        self._objects = objects
        self._settings = settings
        self._clock = clock
        self._gauge = RunningListeners.registered(meter)

    @property
    def settings(self) -> ListenerSettings:
        return self._settings

    async def reconcile(self, request: Request) -> Result:
        p = self._passes.begin(request)
        if p is None:
            self._gauge.drop(request)
            return Result()
        observed = self._observe(p)
        decided = plan(observed)
        inputs = None
        if decided.read:
            # Planned again with what the API holds of the children: read only for a listener
            # that gets this far, so a deletion, a refusal or a foreign listener costs no GET.
            # The caches are looked at again after those reads: a pod this process created in
            # the pass before may have reached them meanwhile (else a second create, a 409).
            inputs = await self._inputs(p)
            decided = plan(replace(self._observe(p), inputs=inputs))
        result = await self._apply(p, decided)
        if result is None:
            # Planned again after its own deletes: with every child gone, the same pass drops
            # the finalizer.
            again = plan(replace(self._observe(p), inputs=inputs))
            result = await self._apply(p, again) or Result(requeue_after=WAIT)
        return result

    def _observe(self, p: Pass) -> Observed:
        listener = p.object
        spec = listener.get("spec") or {}
        memory = p.recalled(ListenerMemory) or ListenerMemory()
        group = self.group(listener)
        if group is None:
            pods = pods_by_replica(listener, self._pods.get)
            restarts = memory.restarts
        else:
            # Named as the group's objects, one per replica; the last member leaving has none
            # left to make `group_listener` from.
            named = {"metadata": {"namespace": group.home, "name": group.object_name}}
            pods = pods_by_replica(named, self._pods.get)
            shared = p.about(group.memory_key).recalled(ListenerMemory)
            restarts = shared.restarts if shared is not None else {}
        return Observed(
            listener=listener,
            settings=self._settings,
            now=self._clock(),
            runner_set=self._sets.get(
                str(spec.get("autoscalingRunnerSetNamespace")),
                str(spec.get("autoscalingRunnerSetName")),
            ),
            pods=pods,
            restarts=dict(restarts),
            lease_owed=memory.lease_owed,
            gone=memory.gone,
            foreign_said=p.done(ListenerStep.FOREIGN_SAID),
            group=group,
        )

    def group(self, listener: JSONDict) -> Group | None:
        """The listener group it names, from the cache's listeners; None without one."""
        if not group_of(listener):
            return None
        return group_members(listener, self._listeners.list(metadata_of(listener)["namespace"]))

    def group_keys(self, listener: JSONDict) -> list[Request]:
        """The first member of its group, which makes the group's objects: a member joining,
        changing or leaving makes it plan the group again; and the listeners the group refuses,
        which a member leaving may let in."""
        group = self.group(listener)
        if group is None:
            return []
        return [
            Request(group.home, name)
            for name in [*group.member_names()[:1], *group.refused]
            if name != metadata_of(listener)["name"]
        ]

    def group_pod_keys(self, pod: JSONDict) -> list[Request]:
        """The listeners owning a listener group's pod (docs/autoscaling.md#listener-groups), and
        the group's first member, which makes its objects: a member that joined after the pod
        was made is not among its owners, and may be the first (members are ordered by age,
        then name), so the pod going must wake it to make the next one."""
        meta = metadata_of(pod)
        if LABEL_LISTENER_GROUP not in (meta.get("labels") or {}):
            return []
        owners = [
            Request(meta["namespace"], str(ref["name"]))
            for ref in meta.get("ownerReferences") or []
            if ref.get("kind") == AUTOSCALING_LISTENER.kind and not ref.get("controller")
        ]
        for owner in owners:
            listener = self._listeners.get(owner.namespace, owner.name)
            group = self.group(listener) if listener is not None else None
            if group is not None and group.members:
                first = Request(group.home, group.member_names()[0])
                return [*owners, first] if first not in owners else owners
        return owners

    async def _inputs(self, p: Pass) -> Inputs:
        """The Role and RoleBinding as stored, the proxy data, the GitHub Secret's credential
        keys and the CA: read each pass, so a rotation or an edit is found in a resync."""
        listener = p.object
        group = self.group(listener)
        if group is not None and not group.members:
            # Its last member being deleted: the Role names the Leases to delete.
            role = await p.read(ROLE, group.namespace, group.object_name)
            return Inputs(credentials={}, role=role)
        makes = True
        if group is not None:
            # The group's: its first member's GitHub config, which every member shares. Only
            # that member makes the group's objects; the others check their own config.
            makes = group.member_names()[0] == metadata_of(listener)["name"]
            name, listener = group.object_name, group.members[0]
        else:
            name = metadata_of(listener)["name"]
        spec = listener.get("spec") or {}
        namespace = str(spec.get("autoscalingRunnerSetNamespace"))
        current_role = await p.read(ROLE, namespace, name) if makes else None
        current_binding = await p.read(ROLE_BINDING, namespace, name) if makes else None
        proxy = (
            await proxy_data(self._objects, namespace, spec["proxy"])
            if makes and spec.get("proxy")
            else None
        )
        github = await self._objects.get(SECRET, namespace, str(spec.get("githubConfigSecret")))
        pem = await root_ca(self._objects, namespace, spec.get("githubServerTLS")) or ""
        return Inputs(
            credentials=secret_credentials(github).config_keys(),
            root_ca=pem,
            proxy=proxy,
            role=current_role,
            role_binding=current_binding,
        )

    async def _apply(self, p: Pass, decided: Plan) -> Result | None:
        """Do what the plan says, through the pass; None when it deleted the last children of
        a listener being deleted (the caller plans again)."""
        if decided.why:
            p.log.info("%s", decided.describe())
        if decided.restarts is not None:
            group = self.group(p.object)
            holder = p if group is None else p.about(group.memory_key)
            holder.memory(ListenerMemory).restarts = dict(decided.restarts)
        if decided.lease_owed:
            p.memory(ListenerMemory).lease_owed = True
        if decided.running is not None:
            self._gauge.publish(p.object, running=decided.running)
        requeue = decided.requeue_after
        left = False
        for step in decided.steps:
            match step:
                case Ensure():
                    if step.prune:
                        await self._ensure_pruned(p, step)
                    elif step.read:
                        await p.ensure(step.kind, step.desired, drift=step.drift)
                    else:
                        await p.ensure(step.kind, step.desired, step.current, drift=step.drift)
                case Delete():
                    await p.delete(step.kind, Request(step.namespace, step.name))
                case CreatePod():
                    if not await self._create_pod(p, step):
                        resync = self._settings.resync_seconds
                        requeue = resync if requeue is None else min(requeue, resync)
                case Warn():
                    await p.warn(
                        step.reason, step.message, subject=step.subject, also_on=step.also_on
                    )
                case Settle():
                    p.settle(step.reason, subject=step.subject)
                case DeleteChild():
                    left = not await self._delete_child(p, step.child) or left
                case AddFinalizer():
                    await add_finalizers(p.lazy, self._objects, [FINALIZER_AUTOSCALING_LISTENER])
                case RemoveFinalizer():
                    await remove_finalizers(p.lazy, self._objects, [FINALIZER_AUTOSCALING_LISTENER])
                    self._gauge.drop(p.key)
                case DeleteSelf():
                    await p.delete(AUTOSCALING_LISTENER, p.key)
                case NoteForeign():
                    p.note(ListenerStep.FOREIGN_SAID)
        if decided.finalizing:
            return Result(requeue_after=WAIT) if left else None
        return Result(requeue_after=requeue) if requeue is not None else Result()

    async def _ensure_pruned(self, p: Pass, step: Ensure) -> None:
        """`step.desired` with a null for each `data` key the stored object has beyond it, so
        that the merge patch removes them."""
        meta = step.desired["metadata"]
        current = await p.read(step.kind, meta["namespace"], meta["name"])
        desired = step.desired
        if current is not None:
            data = desired.get("data") or {}
            stale = {key: None for key in current.get("data") or {} if key not in data}
            desired = {**desired, "data": {**data, **stale}}
        await p.ensure(step.kind, desired, current, drift=step.drift)

    async def _create_pod(self, p: Pass, step: CreatePod) -> bool:
        """Whether the API server took the pod. Pod Security admission (the namespace enforces
        `restricted`) refusing what a trusted template asked for is said on the listener."""
        try:
            await p.ensure(POD, step.desired, None)
        except Forbidden as exc:
            if isinstance(exc, NamespaceTerminating):
                raise
            await p.warn(REASON_POD_REFUSED, str(exc))
            return False
        p.settle(REASON_POD_REFUSED)
        return True

    async def _delete_child(self, p: Pass, child: Child) -> bool:
        """Delete a child of a listener being deleted; whether it went. A DELETE answered
        without finalizers holding the object means it went: it is not asked for again when
        another child keeps the pass coming back."""
        kind, namespace, name = child
        try:
            if await p.delete(kind, Request(namespace, name)) is Deleted.HELD:
                return False
        except KubeError as exc:
            await p.warn(
                REASON_CANNOT_DELETE,
                f"cannot delete {kind.kind} {namespace}/{name}: {exc}",
                subject=child,
                event=False,
            )
            return False
        memory = p.memory(ListenerMemory)
        memory.gone = memory.gone | {child}
        return True


def setup(manager: Manager, deps: Deps) -> AutoscalingListenerReconciler:
    """Add the AutoscalingListener controller to `manager`: listeners and their pods."""
    if deps.listener is None:
        raise ValueError("the AutoscalingListener reconciler needs in-cluster settings")
    reconciler = AutoscalingListenerReconciler(
        listeners=manager.cache(AUTOSCALING_LISTENER),
        sets=manager.cache(AUTOSCALING_RUNNER_SET),
        # Its pods' metadata (the integrity hash) and status: their spec is never read back.
        pods=manager.cache(POD, reads=("status",)),
        objects=manager.objects,
        events=deps.events,
        expectations=deps.expectations,
        settings=deps.listener,
        meter=manager.metrics.metrics.meter,
    )
    manager.add(
        Controller(
            name="autoscalinglistener",
            for_=AUTOSCALING_LISTENER,
            reconciler=reconciler,
            owns=[Owns(POD)],
            watches=[
                Watches(AUTOSCALING_LISTENER, map=reconciler.group_keys),
                # A group's pod has every member as owner, none as controller.
                Watches(POD, map=reconciler.group_pod_keys),
            ],
        )
    )
    return reconciler
