"""The patch-id protocol's table (shared/api/patchid.py, docs/reconcilers.md#the-patch-id-protocol):
what the listener publishes, and what the EphemeralRunnerSet reconciler may do on reading it."""

from __future__ import annotations

import pytest

from shared.api import patchid
from shared.api.patchid import MAX_PATCH_ID, SETTLED


@pytest.mark.parametrize(
    ("previous", "following"),
    [(-1, 0), (0, 1), (41, 42), (MAX_PATCH_ID - 1, MAX_PATCH_ID), (MAX_PATCH_ID, 1)],
)
def test_the_sequence_counts_up_and_wraps_to_1(previous: int, following: int) -> None:
    assert patchid.next_sequence(previous) == following


@pytest.mark.parametrize(
    ("job_event", "target", "previous_target", "resting", "settled"),
    [
        (False, 0, 0, 0, True),  # nothing happened, at rest twice in a row
        (True, 0, 0, 0, False),  # a job (or a failed publication) since the last one
        (False, 0, None, 0, False),  # the first publication
        (False, 0, 2, 0, False),  # just came back to rest
        (False, 2, 2, 0, False),  # steady, but above the resting count
        (False, 3, 3, 3, True),  # a policy's resting count above min_runners
    ],
)
def test_the_writer_publishes_settled_only_at_rest_twice_without_a_job(
    job_event: bool, target: int, previous_target: int | None, resting: int, settled: bool
) -> None:
    assert (
        patchid.is_settled(
            job_event=job_event, target=target, previous_target=previous_target, resting=resting
        )
        is settled
    )
    assert patchid.published(7, settled=settled) == (SETTLED if settled else 7)


def test_the_spec_patch_carries_both_fields() -> None:
    assert patchid.spec_patch(replicas=0, patch_id=SETTLED) == {"replicas": 0, "patchID": 0}
    assert patchid.spec_patch(replicas=3, patch_id=9) == {"replicas": 3, "patchID": 9}


# (spec.patchID, latest patch id on the runners, status.finishedRunnerCleanupPatchID) ->
# (already served, a shortfall is the cleanup's, may scale down)
READER = [
    pytest.param(SETTLED, 0, 0, (False, False, True), id="settled-fresh-set"),
    pytest.param(SETTLED, 5, 5, (False, False, True), id="settled-ignores-latest-and-marker"),
    pytest.param(5, 4, 0, (False, False, False), id="new-id-scales-up-only"),
    pytest.param(5, 5, 0, (True, False, False), id="served-id-does-nothing"),
    pytest.param(5, 4, 5, (False, True, False), id="cleanup-made-the-gap"),
    pytest.param(5, 4, 3, (False, False, False), id="an-older-cleanup-does-not-suppress"),
    pytest.param(2, 9, 0, (False, False, False), id="restarted-listener-below-old-maximum"),
]


@pytest.mark.parametrize(("patch_id", "latest", "marker", "verdict"), READER)
def test_the_reader_acts_as_far_as_the_patch_id_allows(
    patch_id: int, latest: int, marker: int, verdict: tuple[bool, bool, bool]
) -> None:
    assert (
        patchid.already_served(patch_id, latest_served=latest),
        patchid.gap_is_cleanups(patch_id, cleanup_marker=marker),
        patchid.allows_scale_down(patch_id),
    ) == verdict


def test_what_the_writer_publishes_at_rest_lets_the_reader_scale_down() -> None:
    """Both sides together: a settled publication is read as the steady state however many
    patches came before, and an unsettled one never removes runners."""
    sequence = -1
    for _ in range(3):
        sequence = patchid.next_sequence(sequence)
    at_rest = patchid.published(sequence, settled=True)
    reacting = patchid.published(sequence, settled=False)
    assert patchid.allows_scale_down(at_rest)
    assert not patchid.already_served(at_rest, latest_served=at_rest)
    assert not patchid.allows_scale_down(reacting)
    assert patchid.already_served(reacting, latest_served=reacting)


@pytest.mark.parametrize(
    ("completed", "last", "replicas", "needed"),
    [
        (False, (3, 7), 3, False),  # JobStarted or JobAvailable, the same count, a non-zero id
        (False, (3, SETTLED), 3, True),  # the last was settled: a new id protects the runner
        (False, (2, 7), 3, True),  # the count moved
        (False, None, 3, True),  # nothing published yet
        (True, (3, 7), 3, True),  # a job completed: its runner's slot may need refilling
    ],
)
def test_the_writer_skips_a_batch_without_a_completed_job_that_changes_no_count(
    completed: bool, last: tuple[int, int] | None, replicas: int, needed: bool
) -> None:
    """It used to skip a batch of JobStarted alone; offers at maxRunners were published, 1.9
    set patches per job on the default workload (docs/listener.md, "Replicas and the patch
    id")."""
    assert patchid.publication_needed(completed=completed, last=last, replicas=replicas) is needed
