"""What the AutoscalingRunnerSet reconciler reads from its EphemeralRunnerSets: the projection
of its owned watch (metadata, the spec but the listener's `replicas` and `patchID`, `status.phase`,
`status.appliedActionableRevision`, and the counts its own status copies). The counts it only
copies wake it once per window (docs/autoscaling.md#cost-per-runner)."""

from __future__ import annotations

from controller.runtime import Deferral
from controller.runtime.predicates import ProjectionPredicate, stable_metadata
from shared.api import EphemeralRunnerSetPhase
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.views import status_of
from shared.typedefs import JSONDict


def ephemeral_runner_set_projection(ers: JSONDict) -> tuple[object, ...]:
    return (*_decided_on(ers), *_counts(ers))


# The listener's fields: the set reads them only to hold an outdated runner set at 0.
_LISTENER_FIELDS = frozenset({"replicas", "patchID"})


def _decided_on(ers: JSONDict) -> tuple[object, ...]:
    status = status_of(ers)
    spec = ers.get("spec") or {}
    metadata = stable_metadata(ers)
    if status.get("phase") != EphemeralRunnerSetPhase.OUTDATED.value:
        spec = {key: value for key, value in spec.items() if key not in _LISTENER_FIELDS}
        # Which the listener's writes advance; the set never reads it.
        metadata.pop("generation", None)
    return (
        metadata,
        spec,
        status.get("phase"),
        status.get("appliedActionableRevision"),
    )


def _counts(ers: JSONDict) -> tuple[object, ...]:
    status = status_of(ers)
    return (
        status.get("currentReplicas"),
        status.get("pendingEphemeralRunners"),
        status.get("runningEphemeralRunners"),
        status.get("failedEphemeralRunners"),
    )


ERS_TO_ARS = ProjectionPredicate(
    "ephemeralrunnerset-to-autoscalingrunnerset",
    EPHEMERAL_RUNNER_SET,
    ephemeral_runner_set_projection,
)


# ARC's status is read by people and dashboards at second resolution: one write carries every
# count change of a window.
COUNTS_WINDOW_SECONDS = 1.0


def only_counts(old: JSONDict, new: JSONDict) -> bool:
    return _decided_on(old) == _decided_on(new)


ERS_COUNTS = Deferral(only_counts, COUNTS_WINDOW_SECONDS)
