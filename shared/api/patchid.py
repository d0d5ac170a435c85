"""The patch-id protocol, both sides: the listener writes `spec.patchID` with `spec.replicas`,
the EphemeralRunnerSet reconciler reads it (with the latest patch id its runners carry and
`status.finishedRunnerCleanupPatchID`) to decide how far it may act.

docs/reconcilers.md#the-patch-id-protocol (the reader), docs/listener.md#replicas-and-the-patch-id
(the writer). `listener/scaler.py` and `controller/ephemeralrunnerset/rules.py` import the rule
from here, so the two sides cannot drift; tests/shared/api/test_patchid.py is its table.
"""

from __future__ import annotations

from shared.typedefs import JSONDict

SETTLED = 0
"""The patch id of "this is the steady state": not a reaction to a job. Only it allows scaling
down."""

MAX_PATCH_ID = 2**31 - 1
"""The largest patch id (an int32, as ARC's); the sequence starts again from 1 after it."""

SPEC_FIELD = "patchID"
"""The EphemeralRunnerSet's `spec` field the listener writes."""

CLEANUP_MARKER_FIELD = "finishedRunnerCleanupPatchID"
"""The EphemeralRunnerSet's `status` field the reconciler writes: the patch id under which it
cleaned up finished runners."""


# The writer (the listener).


def next_sequence(previous: int) -> int:
    """The sequence number after `previous`: one more, from 1 again after `MAX_PATCH_ID`
    (the listener starts from -1, so its first publication is 0)."""
    return 1 if previous == MAX_PATCH_ID else previous + 1


def is_settled(*, job_event: bool, target: int, previous_target: int | None, resting: int) -> bool:
    """Whether a publication is the steady state: no job handled (nor publication failed)
    since the previous one, and the count is at its resting value twice in a row."""
    return not job_event and target == previous_target and target == resting


def published(sequence: int, *, settled: bool) -> int:
    """The patch id to publish: `SETTLED` for the steady state, else the sequence number."""
    return SETTLED if settled else sequence


def publication_needed(*, completed: bool, last: tuple[int, int] | None, replicas: int) -> bool:
    """Whether a message batch is published. Not one without a JobCompleted when the set was
    last patched (`last`: its replicas and patch id) for the same `replicas` under a non-zero id:
    a new patch could only carry the same count under a new id, which lets the reader add
    runners where there are fewer than `replicas`. With no job completed since, no runner has
    gone for a finished job (a started or offered job leaves none missing: the count that asked
    for its runner was published), and under the id it served the reader removes none either.
    A job offered while the count is held at maxRunners is the common case."""
    if completed or last is None:
        return True
    last_replicas, last_patch_id = last
    return last_patch_id == SETTLED or last_replicas != replicas


def spec_patch(*, replicas: int, patch_id: int) -> JSONDict:
    """The `spec` fields of the listener's merge patch: both always present."""
    return {"replicas": replicas, SPEC_FIELD: patch_id}


# The reader (the EphemeralRunnerSet reconciler).


def already_served(patch_id: int, *, latest_served: int) -> bool:
    """A non-zero patch id equal to the latest one the set's runners carry was served: its
    runners exist (or their watch events are on the way); scaling again would double them."""
    return patch_id != SETTLED and patch_id == latest_served


def gap_is_cleanups(patch_id: int, *, cleanup_marker: int) -> bool:
    """A shortfall under the non-zero patch id that cleaned up finished runners was made by the
    cleanup, not by new demand: wait for the listener's next patch rather than refill."""
    return patch_id != SETTLED and patch_id == cleanup_marker


def allows_scale_down(patch_id: int) -> bool:
    """Only the steady state removes idle runners; a reaction to a job only ever adds."""
    return patch_id == SETTLED
