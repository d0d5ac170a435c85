"""What the EphemeralRunnerSet reconciler reads from its EphemeralRunners: the projection of its
owned watch (metadata, spec, `status.phase`, `status.runnerId`), and which of those changes it
only counts: a runner registering, taking a job or starting to be deleted changes the set's
status counts and nothing it acts on, so those wake it once per window. A runner finishing
wakes it at once, and so does a runner gone whose slot is wanted
(`EphemeralRunnerSetReconciler.wakes_on_runner_gone`): either can free capacity, and deferring
them was measured to lengthen the queue-time tail (docs/reconcilers.md#wakes-per-runner)."""

from __future__ import annotations

from controller.runtime import Deferral
from controller.runtime.predicates import ProjectionPredicate, stable_metadata
from shared.api import is_terminal_phase
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import POD_DISRUPTION_BUDGET
from shared.kube.views import is_deleting, status_of
from shared.typedefs import JSONDict


def ephemeral_runner_projection(er: JSONDict) -> tuple[object, ...]:
    status = status_of(er)
    return (stable_metadata(er), er.get("spec"), status.get("phase"), status.get("runnerId"))


ER_TO_ERS = ProjectionPredicate(
    "ephemeralrunner-to-ephemeralrunnerset", EPHEMERAL_RUNNER, ephemeral_runner_projection
)


def budget_projection(budget: JSONDict) -> tuple[object, ...]:
    """The set reads its PodDisruptionBudget's metadata and spec; the disruption controller's
    status writes (one per change of the pods it selects) wake nothing."""
    return (stable_metadata(budget), budget.get("spec"))


PDB_TO_ERS = ProjectionPredicate(
    "poddisruptionbudget-to-ephemeralrunnerset", POD_DISRUPTION_BUDGET, budget_projection
)


# The set's counts are read by people and dashboards at second resolution.
COUNTS_WINDOW_SECONDS = 1.0


# What a runner's metadata gains when its deletion starts.
DELETION_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds", "generation")


def only_counted(old: JSONDict, new: JSONDict) -> bool:
    """A live runner's phase (none, Pending, Running) or runner id changed, or its deletion
    started, and nothing else the set reads. A runner being deleted holds its slot until it is
    gone (`rules.plan_scaling`), so only the counts move; its going wakes the set at once when
    its slot is wanted. A terminal phase, labels or spec wake it at once too."""
    if old.get("spec") != new.get("spec"):
        return False
    if stable_metadata(old) != stable_metadata(new):
        return _deletion_started(old, new)
    return not is_terminal_phase(status_of(new).get("phase"))


def _deletion_started(old: JSONDict, new: JSONDict) -> bool:
    def rest(obj: JSONDict) -> JSONDict:
        meta = stable_metadata(obj)
        return {k: v for k, v in meta.items() if k not in DELETION_FIELDS}

    return (
        not is_deleting(old)
        and is_deleting(new)
        and rest(old) == rest(new)
        and status_of(old).get("phase") == status_of(new).get("phase")
    )


ER_COUNTS = Deferral(only_counted, COUNTS_WINDOW_SECONDS)
