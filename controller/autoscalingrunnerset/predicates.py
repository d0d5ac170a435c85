"""What the AutoscalingRunnerSet reconciler reads from its EphemeralRunnerSets: the projection
of its owned watch (metadata, the whole spec, `status.phase`,
`status.appliedActionableRevision`, and the counts its own status copies)."""

from __future__ import annotations

from controller.runtime.predicates import ProjectionPredicate, stable_metadata
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.views import status_of
from shared.typedefs import JSONDict


def ephemeral_runner_set_projection(ers: JSONDict) -> tuple[object, ...]:
    status = status_of(ers)
    return (
        stable_metadata(ers),
        ers.get("spec"),
        status.get("phase"),
        status.get("appliedActionableRevision"),
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
