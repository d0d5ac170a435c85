"""What the EphemeralRunnerSet reconciler reads from its EphemeralRunners: the projection of its
owned watch (metadata, spec, `status.phase`, `status.runnerId`), and which of those changes it
only counts: a runner registering or taking a job changes the set's status counts and nothing
it acts on, so those wake it once per window. A runner finishing or going wakes it at once: either
can free capacity, and deferring them was measured to lengthen the queue-time tail
(docs/reconcilers.md#wakes-per-runner)."""

from __future__ import annotations

from controller.runtime import Deferral
from controller.runtime.predicates import ProjectionPredicate, stable_metadata
from shared.api import is_terminal_phase
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.views import status_of
from shared.typedefs import JSONDict


def ephemeral_runner_projection(er: JSONDict) -> tuple[object, ...]:
    status = status_of(er)
    return (stable_metadata(er), er.get("spec"), status.get("phase"), status.get("runnerId"))


ER_TO_ERS = ProjectionPredicate(
    "ephemeralrunner-to-ephemeralrunnerset", EPHEMERAL_RUNNER, ephemeral_runner_projection
)


# The set's counts are read by people and dashboards at second resolution.
COUNTS_WINDOW_SECONDS = 1.0


def only_counted(old: JSONDict, new: JSONDict) -> bool:
    """A live runner's phase (none, Pending, Running) or runner id changed, and nothing else the
    set reads: a terminal phase, a deletion, labels or spec wake it at once."""
    if stable_metadata(old) != stable_metadata(new) or old.get("spec") != new.get("spec"):
        return False
    return not is_terminal_phase(status_of(new).get("phase"))


ER_COUNTS = Deferral(only_counted, COUNTS_WINDOW_SECONDS)
