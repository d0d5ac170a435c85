"""The EphemeralRunnerSet's decisions: buckets, the patch-id protocol, victims, failed runners
(docs/reconcilers.md#ephemeralrunnerset)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from controller.ephemeralrunnerset.rules import (
    Children,
    Finalizing,
    Observed,
    ScalePlan,
    SpecRevision,
    classify,
    counts_status,
    desired_phase,
    only_listener_fields_changed,
    plan,
    plan_replacements,
    plan_scaling,
    replacement_due,
    runner_spec_hash,
    scale_down_candidates,
    track_runner_spec,
)
from controller.runners.backoff import ReplacementPolicy
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH
from shared.api.names import FINALIZER_EPHEMERAL_RUNNER_SET
from shared.typedefs import JSONDict

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def er(
    name: str,
    phase: str = "",
    *,
    patch: int | str | None = 0,
    revision: int | None = None,
    deleting: bool = False,
    created: int = 0,
    runner_id: int = 1,
    job: str = "",
    ready: bool = False,
    lineage: int = 0,
) -> JSONDict:
    annotations: dict[str, str] = {}
    if patch is not None:
        annotations["actions.github.com/patch-id"] = str(patch)
    if revision is not None:
        annotations["actions.github.com/actionable-revision"] = str(revision)
    if lineage:
        annotations["gha-runner-scaler/failed-runner-replacements"] = str(lineage)
    meta: JSONDict = {
        "name": name,
        "annotations": annotations,
        "creationTimestamp": f"2026-12-02T11:{created:02d}:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T11:59:00Z"
    status: JSONDict = {"runnerId": runner_id, "ready": ready}
    if phase:
        status["phase"] = phase
    if job:
        status["jobId"] = job
    return {"metadata": meta, "status": status}


def names(runners: Iterable[JSONDict]) -> list[str]:
    return [r["metadata"]["name"] for r in runners]


def test_classify_buckets_and_latest_patch_id() -> None:
    children = classify(
        [
            er("empty", "", patch=3),
            er("pending", "Pending", patch=1),
            er("running", "Running", patch="garbage"),
            er("finished", "Succeeded"),
            er("failed", "Failed"),
            er("outdated", "Outdated", revision=2),
            er("stale", "Outdated", revision=1),
            er("unstamped", "Outdated"),
            er("deleting", "Running", patch=9, deleting=True),
        ],
        applied_revision=2,
    )
    assert names(children.pending) == ["empty", "pending"]
    assert names(children.running) == ["running"]
    assert names(children.finished) == ["finished"]
    assert names(children.failed) == ["failed"]
    assert names(children.outdated) == ["outdated"]
    assert names(children.stale_outdated) == ["stale", "unstamped"]
    assert names(children.deleting) == ["deleting"]
    assert children.latest_patch_id == 9
    assert children.scale_total == 4


def kids(**counts: int) -> Children:
    runners = []
    phases = {
        "pending": "Pending",
        "running": "Running",
        "finished": "Succeeded",
        "failed": "Failed",
    }
    latest = counts.pop("latest", 0)
    for bucket, n in counts.items():
        for i in range(n):
            runners.append(
                er(
                    f"{bucket}-{i}",
                    phases.get(bucket, "Running"),
                    patch=latest,
                    deleting=bucket == "deleting",
                )
            )
    return classify(runners, applied_revision=0)


@pytest.mark.parametrize(
    ("case", "replicas", "patch", "children", "marker", "expected"),
    [
        ("already served", 5, 3, kids(pending=1, latest=3), 0, None),
        ("new patch scales up", 3, 4, kids(pending=1, latest=3), 0, ScalePlan(create=2)),
        ("patch 0 scales up", 3, 0, kids(pending=1, latest=3), 0, ScalePlan(create=2)),
        ("patch 0 scales down", 1, 0, kids(pending=3), 0, ScalePlan(scale_down=2)),
        ("patch>0 never scales down", 1, 4, kids(pending=3, latest=3), 0, ScalePlan()),
        (
            "finished cleaned first",
            3,
            4,
            kids(running=1, finished=1, latest=3),
            0,
            ScalePlan(cleanup_finished=True),
        ),
        (
            "finished cleaned on patch 0",
            3,
            0,
            kids(running=1, finished=1),
            0,
            ScalePlan(cleanup_finished=True),
        ),
        (
            "gap made by the cleanup",
            3,
            4,
            kids(running=1, latest=3),
            4,
            ScalePlan(suppressed_by_cleanup=True),
        ),
        ("marker of another patch", 3, 5, kids(running=1, latest=3), 4, ScalePlan(create=2)),
        ("patch 0 ignores the marker", 3, 0, kids(running=1), 0, ScalePlan(create=2)),
        ("deleting runners count", 3, 4, kids(running=1, deleting=2, latest=3), 0, ScalePlan()),
        ("failed runners count", 3, 4, kids(failed=2, latest=3), 0, ScalePlan(create=1)),
    ],
)
def test_plan_scaling(
    case: str,
    replicas: int,
    patch: int,
    children: Children,
    marker: int,
    expected: ScalePlan | None,
) -> None:
    plan = plan_scaling(replicas=replicas, patch_id=patch, children=children, cleanup_marker=marker)
    assert plan == expected, case


@pytest.mark.parametrize(
    ("replicas", "failed", "due", "others", "expected"),
    [(2, 1, 1, 1, 1), (1, 1, 1, 1, 0), (0, 2, 2, 0, 0), (3, 2, 1, 1, 1)],
)
def test_failed_runners_are_replaced_only_while_wanted(
    replicas: int, failed: int, due: int, others: int, expected: int
) -> None:
    children = kids(failed=failed, pending=others)
    assert plan_replacements(replicas=replicas, children=children, due=due) == expected


def test_replacement_plan_creates_no_extra_runner() -> None:
    children = kids(failed=1, pending=1)
    plan = plan_scaling(
        replicas=2,
        patch_id=0,
        children=children,
        cleanup_marker=0,
        retired_failed=1,
        replacements=1,
    )
    assert plan == ScalePlan()


def test_scale_down_takes_starting_then_idle_then_idle_running_oldest_first_never_busy() -> None:
    request_only = er("busy-request-only", "Running", created=0)
    request_only["status"]["jobRequestId"] = 7
    children = classify(
        [
            request_only,
            er("idle-new", "Pending", ready=True, created=9),
            er("idle-old", "Pending", ready=True, created=1),
            er("starting-new", "Pending", created=8),
            er("starting-old", "Pending", created=2),
            er("unregistered", "Pending", runner_id=0, created=0),
            er("busy", "Running", job="j", created=0),
            er("busy-pending-cache", "Pending", job="j", created=0),
            er("failed", "Failed", created=0),
            er("running-idle-new", "Running", created=3),
            er("running-idle-old", "Running", created=0),
            er("running-unregistered", "Running", runner_id=0, created=0),
        ],
        applied_revision=0,
    )
    assert names(scale_down_candidates(children)) == [
        "starting-old",
        "starting-new",
        "idle-old",
        "idle-new",
        "running-idle-old",
        "running-idle-new",
    ]


@pytest.mark.parametrize(
    ("lineage", "failed_ago", "due", "wait"),
    [
        (0, 11, True, None),
        (0, 5, False, timedelta(seconds=5)),
        (2, 39, False, timedelta(seconds=1)),
        (2, 40, True, None),
        (20, 599, False, timedelta(seconds=1)),
    ],
)
def test_failed_replacement_backoff(
    lineage: int, failed_ago: int, due: bool, wait: timedelta | None
) -> None:
    failed = er("f", "Failed", lineage=lineage)
    at = (NOW - timedelta(seconds=failed_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    failed["status"]["failures"] = {"uid": at}
    ready, next_wait = replacement_due([failed], now=NOW, policy=ReplacementPolicy())
    assert bool(ready) is due
    assert next_wait == wait


def test_failed_without_pod_failures_counts_from_creation() -> None:
    failed = er("f", "Failed", created=59)
    now = datetime(2026, 12, 2, 11, 59, 4, tzinfo=UTC)
    ready, wait = replacement_due([failed], now=now, policy=ReplacementPolicy())
    assert ready == []
    assert wait == timedelta(seconds=6)


@pytest.mark.parametrize(
    ("current", "outdated", "advanced", "expected"),
    [
        ("", 0, False, "Running"),
        ("Running", 1, False, "Outdated"),
        ("Outdated", 0, False, "Outdated"),
        ("Outdated", 0, True, "Running"),
        ("Outdated", 1, True, "Outdated"),
    ],
)
def test_outdated_phase(current: str, outdated: int, advanced: bool, expected: str) -> None:
    runners = [er(f"o{i}", "Outdated", revision=1) for i in range(outdated)]
    children = classify(runners, applied_revision=1)
    assert desired_phase(current=current, children=children, revision_advanced=advanced) == (
        expected
    )


def test_stale_outdated_runner_does_not_make_the_set_outdated() -> None:
    children = classify([er("o", "Outdated", revision=1)], applied_revision=2)
    assert desired_phase(current="Running", children=children, revision_advanced=False) == (
        "Running"
    )


def test_counts() -> None:
    children = kids(pending=1, running=2, failed=3, finished=4, deleting=5)
    assert counts_status(children) == {
        "currentReplicas": 6,
        "pendingEphemeralRunners": 1,
        "runningEphemeralRunners": 2,
        "failedEphemeralRunners": 3,
    }


def runner_set(
    *, image: str = "v1", recorded: str | None = "", revision: int = 0, applied: int = 0
) -> JSONDict:
    spec: JSONDict = {"ephemeralRunnerSpec": {"spec": {"containers": [{"image": image}]}}}
    if revision:
        spec["actionableRevision"] = revision
    obj: JSONDict = {"metadata": {"name": "arc"}, "spec": spec}
    if recorded is not None:
        old = runner_set(image=recorded or image, recorded=None)
        obj["metadata"]["annotations"] = {
            "actions.github.com/runner-spec-hash": runner_spec_hash(old)
        }
    if applied:
        obj["status"] = {"appliedActionableRevision": applied}
    return obj


IDLE = classify([er("idle", "Pending")], applied_revision=0)


def arc_digest(obj: JSONDict) -> JSONDict:
    """`obj` with a released ARC's digest recorded (its own alphabet, at most ten characters)."""
    obj["metadata"]["annotations"] = {"actions.github.com/runner-spec-hash": "5d7c9f8bc4"}
    return obj


BUSY = classify([er("busy", "Running", job="j")], applied_revision=0)


@pytest.mark.parametrize(
    ("obj", "children", "expected"),
    [
        (runner_set(), IDLE, None),
        (runner_set(recorded=None), IDLE, "record"),
        (runner_set(recorded="v0", revision=3, applied=4), IDLE, 5),
        (runner_set(recorded="v0", revision=4, applied=3), IDLE, "record"),
        (runner_set(recorded="v0"), BUSY, "record"),
        (runner_set(recorded="v0"), Children(), "record"),
        # A set kept from ARC (`migrate-from-arc`): ARC's idle runners are not recycled.
        (arc_digest(runner_set(revision=3, applied=4)), IDLE, "record"),
    ],
    ids=[
        "unchanged",
        "first-seen",
        "changed",
        "revision-given",
        "only-busy",
        "no-runners",
        "arc-digest",
    ],
)
def test_track_runner_spec(obj: JSONDict, children: Children, expected: int | str | None) -> None:
    tracked = track_runner_spec(obj, children)
    if expected is None:
        assert tracked is None
    else:
        revision = expected if isinstance(expected, int) else None
        assert tracked == SpecRevision(runner_spec_hash(obj), revision)


def test_an_outdated_set_advances_without_runners() -> None:
    obj = runner_set(recorded="v0")
    obj["status"] = {"phase": "Outdated"}
    assert track_runner_spec(obj, Children()) == SpecRevision(runner_spec_hash(obj), 1)


def test_a_set_an_autoscaling_runner_set_controls_is_left_to_it() -> None:
    obj = runner_set(recorded="v0")
    obj["metadata"]["ownerReferences"] = [
        {"kind": "AutoscalingRunnerSet", "name": "arc", "uid": "u", "controller": True}
    ]
    assert track_runner_spec(obj, IDLE) is None


def listener_patched(replicas: int, patch: int, **status: object) -> JSONDict:
    obj: JSONDict = {
        "metadata": {"name": "arc", "generation": patch + 1, "resourceVersion": str(patch)},
        "spec": {"replicas": replicas, "patchID": patch, "ephemeralRunnerSpec": {"x": 1}},
        "status": dict(status),
    }
    return obj


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (listener_patched(3, 5), True),
        (listener_patched(2, 4, currentReplicas=1), False),
        ({**listener_patched(2, 4), "spec": {"replicas": 2, "patchID": 4}}, False),
        (
            {
                **listener_patched(2, 4),
                "metadata": {"name": "arc", "generation": 5, "labels": {"a": "b"}},
            },
            False,
        ),
    ],
)
def test_only_listener_fields_changed(new: JSONDict, expected: bool) -> None:
    """Replicas, patch id, generation and the volatile metadata are the listener's patch."""
    assert only_listener_fields_changed(listener_patched(2, 4), new) is expected


def settled(replicas: int, patch: int, **status: object) -> JSONDict:
    """A set as a pass leaves it (its finalizer on, its runner spec's hash recorded), after the
    listener's patch."""
    obj = listener_patched(replicas, patch, **status)
    obj["metadata"]["finalizers"] = [FINALIZER_EPHEMERAL_RUNNER_SET]
    obj["metadata"]["annotations"] = {ANNOTATION_RUNNER_SPEC_HASH: runner_spec_hash(obj)}
    return obj


def failed_runners(minutes: int) -> Children:
    return classify([failed_since(minutes)], applied_revision=0)


def observe(
    runner_set: JSONDict,
    children: Children,
    *,
    marker: int = 0,
    max_runners: int | None = None,
    refused_ago: float | None = None,
) -> Observed:
    return Observed(
        runner_set=runner_set,
        children=children,
        cleanup_marker=marker,
        max_runners=max_runners,
        now=NOW,
        replacement=ReplacementPolicy(),
        creates_refused_at=None if refused_ago is None else NOW - timedelta(seconds=refused_ago),
    )


def failed_since(minutes: int) -> JSONDict:
    runner = er("f", "Failed")
    runner["metadata"]["creationTimestamp"] = (NOW - timedelta(minutes=minutes)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return runner


@pytest.mark.parametrize(
    ("case", "observed", "acts"),
    [
        ("at maxRunners, a new id", observe(settled(2, 4), kids(running=2, latest=3)), False),
        ("fewer wanted, non-zero id", observe(settled(1, 4), kids(running=2, latest=3)), False),
        ("already served", observe(settled(5, 3), kids(running=2, latest=3)), False),
        ("a runner missing", observe(settled(3, 4), kids(running=2, latest=3)), True),
        ("settled, idle to remove", observe(settled(1, 0), kids(pending=2)), True),
        ("settled, nothing to do", observe(settled(2, 0), kids(pending=2)), False),
        ("the cleanup's gap", observe(settled(3, 4), kids(running=2, latest=3), marker=4), False),
        ("finished runners", observe(settled(2, 4), kids(running=1, finished=1)), True),
        # Before plan, any finished runner woke the set; under a patch id served already the
        # pass does nothing with it until the next id, so neither does the wake rule now.
        (
            "finished runners, patch id served",
            observe(settled(2, 3), kids(running=1, finished=1, latest=3)),
            False,
        ),
        (
            "a failed runner due",
            observe(settled(2, 4), classify([failed_since(5)], applied_revision=0)),
            True,
        ),
        # Before plan, any failed runner woke the set; one still in its backoff is the pass's
        # requeue, which the pass that saw it fail scheduled.
        (
            "a failed runner in its backoff",
            observe(settled(1, 4), failed_runners(0)),
            False,
        ),
        (
            "a revision to apply",
            observe(
                {**settled(2, 4), "spec": {"replicas": 2, "actionableRevision": 2}},
                kids(running=2, latest=3),
            ),
            True,
        ),
        ("Outdated", observe(settled(2, 4, phase="Outdated"), kids(running=2, latest=3)), True),
        ("no finalizer yet", observe(listener_patched(2, 4), kids(running=2, latest=3)), True),
        # A namespace being deleted refused a create: a runner going (the namespace controller
        # deleting them) wakes nothing, until the hold is over.
        (
            "a runner missing, the namespace refused lately",
            observe(settled(3, 4), kids(running=2, latest=3), refused_ago=5),
            False,
        ),
        (
            "a runner missing, the namespace refused long ago",
            observe(settled(3, 4), kids(running=2, latest=3), refused_ago=31),
            True,
        ),
        # The listener's token may write any number; the set runs at most its owner's bound.
        (
            "above maxRunners, at the bound",
            observe(settled(1000, 4), kids(running=3, latest=3), max_runners=3),
            False,
        ),
    ],
)
def test_what_a_plan_does_is_what_wakes_the_set(case: str, observed: Observed, acts: bool) -> None:
    assert plan(observed).acts is acts, case


def test_a_plan_in_the_order_of_the_pass() -> None:
    runner_set = settled(4, 5)
    runner_set["metadata"]["deletionTimestamp"] = "2026-12-02T11:00:00Z"
    assert plan(observe(runner_set, kids(running=1))).finalizing is Finalizing.CLEAN_UP
    assert plan(observe(runner_set, kids())).finalizing is Finalizing.RELEASE
    runner_set["metadata"]["finalizers"] = []
    assert plan(observe(runner_set, kids(running=1))).finalizing is Finalizing.NOTHING

    revision = {**settled(2, 4), "spec": {"replicas": 2, "actionableRevision": 3}}
    applying = plan(observe(revision, kids(running=2, latest=3)))
    assert (applying.apply_revision, applying.revision_phase, applying.scaling) == (
        3,
        "Running",
        None,
    )

    outdated = plan(observe(settled(2, 4), classify([er("o", "Outdated")], applied_revision=0)))
    assert (outdated.outdated, outdated.phase, outdated.scaling) == (True, "Outdated", None)

    bounded = plan(observe(settled(1000, 4), kids(running=1, latest=3), max_runners=3))
    assert (bounded.written_replicas, bounded.replicas, bounded.above_max) == (1000, 3, True)
    assert bounded.scaling == ScalePlan(create=2)

    retiring = plan(observe(settled(1, 4), failed_runners(5)))
    assert (len(retiring.replace), retiring.replacements) == (1, 1)


def test_after_the_namespace_refused_a_create_nothing_is_created_until_the_hold_ends() -> None:
    """Issue 41: during a namespace's deletion a set sent every missing runner on each pass (53
    refused creates in half a second for 10 runners)."""
    held = plan(observe(settled(10, 1), kids(), refused_ago=10))
    assert held.scaling == ScalePlan(held_by_namespace=True)
    assert held.wait == timedelta(seconds=20)
    # A failed runner due is still retired (a delete is allowed), and not replaced.
    retiring = plan(observe(settled(1, 4), failed_runners(5), refused_ago=10))
    assert (len(retiring.replace), retiring.replacements) == (1, 0)
    # Scaling down is not held.
    down = plan(observe(settled(1, 0), kids(pending=3), refused_ago=10))
    assert down.scaling == ScalePlan(scale_down=2)
    assert plan(observe(settled(10, 1), kids(), refused_ago=30)).scaling == ScalePlan(create=10)


@pytest.mark.parametrize(
    ("observed", "line"),
    [
        (
            observe(settled(3, 2), kids(running=2, latest=1), marker=2),
            "no scale-up to 3 under patch id 2: the gap was made by cleaning up finished "
            "runners, not by new demand",
        ),
        (
            observe(settled(3, 2), kids(running=1, finished=1, latest=1)),
            "cleaning up 1 finished runner(s) under patch id 2",
        ),
        (
            observe(settled(3, 2), kids(running=1, latest=1)),
            "creating 2 runner(s) for replicas=3 patchID=2",
        ),
        (observe(settled(1, 0), kids(pending=3)), "scaling down by 2 idle runner(s) to replicas=1"),
        (observe(settled(2, 0), kids(pending=2)), ""),
        (
            observe(settled(3, 2), kids(running=1, latest=1), refused_ago=1),
            "no scale-up to 3: the namespace is being deleted and refuses new runners",
        ),
    ],
)
def test_the_plan_says_what_it_does_in_one_line(observed: Observed, line: str) -> None:
    assert plan(observed).describe(observed.children) == line
