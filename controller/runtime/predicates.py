"""Update predicates of the owned watches, as projections of the fields each reconciler reads.

design.md behaviour 2: an update of a child wakes its owner's reconciler only when the part of the
child that reconciler reads has changed. Each predicate is a projection; an update is dropped only
when the projections of the old and the new object are equal, so a field left out of a projection
is a field the owner's reconciler promises not to read. Objects of another kind (or not objects
at all) always pass: a predicate never hides what it does not understand. Create, delete and
generic events are never filtered, and primary watches have no predicate.

"metadata" in a projection means all of it but `resourceVersion` and `managedFields`, which change
on every write and carry nothing a reconciler decides on; with them, no update would ever drop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from shared.kube.objects import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET, POD, Kind

JSONDict = dict[str, Any]

_VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def pod_ready(pod: JSONDict) -> bool:
    """The one definition of readiness: the pod's Ready condition is "True"."""
    conditions = _status(pod).get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def stable_metadata(obj: JSONDict) -> JSONDict:
    """The object's metadata without the fields that change on every write."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return {}
    return {k: v for k, v in meta.items() if k not in _VOLATILE_METADATA}


def _status(obj: JSONDict) -> JSONDict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def ephemeral_runner_set_projection(ers: JSONDict) -> tuple[object, ...]:
    """What the AutoscalingRunnerSet reconciler reads from its EphemeralRunnerSets."""
    status = _status(ers)
    return (
        stable_metadata(ers),
        ers.get("spec"),
        status.get("phase"),
        status.get("appliedActionableRevision"),
    )


def ephemeral_runner_projection(er: JSONDict) -> tuple[object, ...]:
    """What the EphemeralRunnerSet reconciler reads from its EphemeralRunners."""
    status = _status(er)
    return (stable_metadata(er), er.get("spec"), status.get("phase"), status.get("runnerId"))


def pod_projection(pod: JSONDict) -> tuple[object, ...]:
    """What the EphemeralRunner reconciler reads from its Pod."""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    status = _status(pod)
    return (
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        status.get("phase"),
        status.get("reason"),
        status.get("message"),
        status.get("containerStatuses"),
        status.get("initContainerStatuses"),
        pod_ready(pod),
    )


@dataclass(frozen=True, slots=True)
class ProjectionPredicate:
    """Passes an update unless both objects are of `kind` and project to equal values."""

    name: str
    kind: Kind
    project: Callable[[JSONDict], object]

    def _expected(self, obj: object) -> TypeGuard[JSONDict]:
        return (
            isinstance(obj, dict)
            and obj.get("kind") == self.kind.kind
            and obj.get("apiVersion") == self.kind.api_version
        )

    def update(self, old: object, new: object) -> bool:
        if self._expected(old) and self._expected(new):
            return self.project(old) != self.project(new)
        return True


ERS_TO_ARS = ProjectionPredicate(
    "ephemeralrunnerset-to-autoscalingrunnerset",
    EPHEMERAL_RUNNER_SET,
    ephemeral_runner_set_projection,
)
ER_TO_ERS = ProjectionPredicate(
    "ephemeralrunner-to-ephemeralrunnerset", EPHEMERAL_RUNNER, ephemeral_runner_projection
)
POD_TO_ER = ProjectionPredicate("pod-to-ephemeralrunner", POD, pod_projection)
