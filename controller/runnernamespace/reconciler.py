"""Deleting a runner namespace finishes under least privilege.

The controller's writes in a runner namespace come from the RoleBinding `gha-controller` there
(manifests/runner-namespace/), which binds the ClusterRole gha-controller-runner-namespace. When
the namespace is deleted, the namespace controller deletes the binding in the same sweep as
everything else, possibly first, while runners and their sets still hold the finalizers only
this controller removes; without it every cleanup call would be refused and the namespace would
stay Terminating for ever.

So while any AutoscalingRunnerSet, EphemeralRunnerSet or EphemeralRunner exists in a namespace,
the RoleBinding carries PROTECTION_FINALIZER: deleted, it stays (a binding being deleted still
grants), and the finalizer goes when the last of those objects has gone, by a patch the binding
itself still allows. (A Role in the namespace would not do: releasing either of a Role and its
binding first leaves no permission to release the other.) One key per
namespace; only additions and deletions of those objects wake it (their updates never change
the answer), and only those that may change the answer: an object appearing where the binding
is protected, or going where another is left, does not (`wakes`). It writes only when the answer
changes, so a runner's life costs nothing here, neither a pass nor a request.
"""

from __future__ import annotations

import logging

from controller.deps import Deps
from controller.runtime import (
    Controller,
    EventRecorder,
    LazyObject,
    Manager,
    ProjectionPredicate,
    Request,
    Result,
    Store,
    Watches,
    add_finalizers,
    remove_finalizers,
)
from shared.api.kinds import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.errors import Forbidden, NotFound
from shared.kube.objects import ROLE_BINDING, Kind, Objects
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

PROTECTION_FINALIZER = "actions.github.com/runner-namespace-protection"
ROLE_NAME = "gha-controller"
"""The RoleBinding of manifests/runner-namespace/."""
RUNNER_KINDS = (AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET, EPHEMERAL_RUNNER)
MISSING_RETRY_SECONDS = 300.0
"""How soon a namespace without the Role is looked at again (Roles are not watched)."""


def _namespace_of(obj: JSONDict) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


class RunnerNamespaceReconciler:
    def __init__(
        self, *, caches: dict[Kind, Store], objects: Objects, events: EventRecorder
    ) -> None:
        self._caches = caches
        self._objects = objects
        self._events = events
        self._protected: dict[str, bool] = {}
        """Per namespace, what this process last made true (absent: not known yet)."""

    @staticmethod
    def keys(obj: JSONDict) -> tuple[Request, ...]:
        """The key of the object's namespace."""
        return (Request(_namespace_of(obj), ROLE_NAME),)

    def wakes(self, obj: JSONDict) -> bool:
        """Whether the object's add or delete may change the answer: `acts` of its namespace,
        judged on the caches after the event (they are updated before their handlers run). A
        pass running on the namespace is woken again by the runtime whatever this says."""
        return self.acts(_namespace_of(obj))

    def acts(self, namespace: str) -> bool:
        """Whether a pass would write: whether a runner object is left in the namespace is not
        what this process last made true there."""
        return self._protected.get(namespace) != self._needed(namespace)

    def _needed(self, namespace: str) -> bool:
        return any(store.count_in(namespace) for store in self._caches.values())

    async def reconcile(self, request: Request) -> Result:
        namespace = request.namespace
        needed = self._needed(namespace)
        if not self.acts(namespace):
            return Result()
        for kind in (ROLE_BINDING,):
            try:
                current = await self._objects.get(kind, namespace, ROLE_NAME)
            except (NotFound, Forbidden) as exc:
                self._protected.pop(namespace, None)
                if needed:
                    await self._report_missing(namespace, kind, exc)
                    return Result(requeue_after=MISSING_RETRY_SECONDS)
                continue
            obj = LazyObject(current, kind=kind)
            protected = PROTECTION_FINALIZER in (current["metadata"].get("finalizers") or [])
            if not needed:
                await remove_finalizers(obj, self._objects, [PROTECTION_FINALIZER])
            elif protected:
                pass  # a process before this one protected it (a restart, a new leader)
            elif (current.get("metadata") or {}).get("deletionTimestamp"):
                # Too late to protect (no finalizer can be added to an object being deleted):
                # cleanup in this namespace may be refused from now on.
                log.warning(
                    "%s %s/%s is being deleted without protection: runner cleanup there may be "
                    "refused",
                    kind.kind,
                    namespace,
                    ROLE_NAME,
                    extra={"namespace": namespace},
                )
            elif await add_finalizers(obj, self._objects, [PROTECTION_FINALIZER]):
                log.info(
                    "protecting %s %s/%s until the namespace's runners are gone",
                    kind.kind,
                    namespace,
                    ROLE_NAME,
                    extra={"namespace": namespace},
                )
        if needed:
            self._protected[namespace] = True
        else:
            self._protected.pop(namespace, None)
            log.info(
                "no runner object left in %s: RoleBinding %s released",
                namespace,
                ROLE_NAME,
                extra={"namespace": namespace},
            )
        return Result()

    async def _report_missing(self, namespace: str, kind: Kind, exc: Exception) -> None:
        """A runner namespace without the runner-namespace component (or with a binding the
        controller cannot read): say so in the log and on the namespace's runner sets."""
        reason = "is missing" if isinstance(exc, NotFound) else "cannot be read"
        message = (
            f"{kind.kind} {ROLE_NAME} in namespace {namespace} {reason}: the controller cannot "
            f"manage runners here; add the runner-namespace component (docs/install.md)"
        )
        log.warning(message, extra={"namespace": namespace})
        for store in (self._caches[AUTOSCALING_RUNNER_SET], self._caches[EPHEMERAL_RUNNER_SET]):
            for key in store.keys_in(namespace):
                obj = store.get(key.namespace, key.name)
                if obj is not None:
                    await self._events.warning(
                        obj, reason="RunnerNamespaceRoleMissing", message=message
                    )


def setup(manager: Manager, deps: Deps) -> RunnerNamespaceReconciler:
    """Add the runner-namespace controller to `manager`: one key per namespace, woken when a
    runner object appearing there or going may change the answer."""
    caches = {kind: manager.cache(kind, reads=()) for kind in RUNNER_KINDS}
    reconciler = RunnerNamespaceReconciler(
        caches=caches, objects=manager.objects, events=deps.events
    )
    manager.add(
        Controller(
            name="runnernamespace",
            for_=None,
            reconciler=reconciler,
            watches=[
                Watches(
                    kind,
                    map=reconciler.keys,
                    wakes=reconciler.wakes,
                    # Existence is all that counts: no update changes it.
                    predicate=ProjectionPredicate(
                        f"runnernamespace-{kind.plural}", kind, lambda _: None
                    ),
                )
                for kind in RUNNER_KINDS
            ],
        )
    )
    return reconciler
