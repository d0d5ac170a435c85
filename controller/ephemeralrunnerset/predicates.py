"""What the EphemeralRunnerSet reconciler reads from its EphemeralRunners: the projection of its
owned watch (metadata, spec, `status.phase`, `status.runnerId`)."""

from __future__ import annotations

from controller.runtime.predicates import ProjectionPredicate, stable_metadata
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.views import status_of
from shared.typedefs import JSONDict


def ephemeral_runner_projection(er: JSONDict) -> tuple[object, ...]:
    status = status_of(er)
    return (stable_metadata(er), er.get("spec"), status.get("phase"), status.get("runnerId"))


ER_TO_ERS = ProjectionPredicate(
    "ephemeralrunner-to-ephemeralrunnerset", EPHEMERAL_RUNNER, ephemeral_runner_projection
)
