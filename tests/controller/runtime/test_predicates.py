"""Projection predicates: one row per field inside each projection (passes), rows for fields
outside it (dropped), and a property tying drops to the fields the reconcilers read."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.autoscalingrunnerset.predicates import ERS_TO_ARS
from controller.ephemeralrunner.predicates import POD_TO_ER
from controller.ephemeralrunner.rules import decide_from_pod
from controller.ephemeralrunnerset.predicates import ER_TO_ERS
from controller.runtime import ProjectionPredicate
from controller.settings import RunnerSettings
from shared.kube.views import pod_ready
from shared.typedefs import JSONDict

Path = tuple[str, ...]
Row = tuple[Path, object, bool]


def ers() -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": "set-abcde",
            "namespace": "arc",
            "uid": "ers-uid",
            "resourceVersion": "10",
            "generation": 1,
            "labels": {"app.kubernetes.io/component": "runner-set"},
            "annotations": {"actions.github.com/runner-spec-hash": "h1"},
            "ownerReferences": [{"kind": "AutoscalingRunnerSet", "name": "ars", "uid": "u1"}],
            "finalizers": ["ephemeralrunner.actions.github.com/finalizer"],
        },
        "spec": {"replicas": 2, "patchID": 1, "ephemeralRunnerSpec": {"runnerScaleSetId": 7}},
        "status": {
            "phase": "Running",
            "appliedActionableRevision": 3,
            "currentReplicas": 2,
            "pendingEphemeralRunners": 1,
            "runningEphemeralRunners": 1,
            "failedEphemeralRunners": 0,
        },
    }


def er() -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {
            "name": "set-abcde-runner-x",
            "namespace": "arc",
            "uid": "er-uid",
            "resourceVersion": "20",
            "generation": 1,
            "labels": {"actions.github.com/scale-set-name": "set"},
            "annotations": {"actions.github.com/patch-id": "1"},
            "finalizers": ["ephemeralrunner.actions.github.com/finalizer"],
        },
        "spec": {"githubConfigUrl": "https://github.com/o", "runnerScaleSetId": 7},
        "status": {
            "phase": "Pending",
            "runnerId": 12,
            "ready": False,
            "reason": "",
            "message": "",
            "jobRequestId": 0,
            "jobRepositoryName": "",
            "failures": {},
        },
    }


def pod() -> JSONDict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "set-abcde-runner-x",
            "namespace": "arc",
            "uid": "pod-uid",
            "resourceVersion": "30",
            "labels": {"app": "runner"},
            "annotations": {"note": "a"},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "runner", "image": "r:1"}]},
        "status": {
            "phase": "Running",
            "reason": "",
            "message": "",
            "podIP": "10.0.0.1",
            "hostIP": "192.168.0.1",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ],
            "containerStatuses": [{"name": "runner", "ready": True, "restartCount": 0}],
            "initContainerStatuses": [],
        },
    }


def changed(obj: JSONDict, path: Path, value: object) -> JSONDict:
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return out


ERS_ROWS: list[Row] = [
    (("metadata", "labels"), {"x": "y"}, True),
    (("metadata", "annotations"), {"actions.github.com/runner-spec-hash": "h2"}, True),
    (("metadata", "finalizers"), [], True),
    (("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z", True),
    (("metadata", "ownerReferences"), [], True),
    # The listener's fields and the generation they advance: read only while the set is
    # Outdated (held at 0), so the listener's patches no longer wake the AutoscalingRunnerSet.
    (("metadata", "generation"), 2, False),
    (("spec", "replicas"), 3, False),
    (("spec", "patchID"), 2, False),
    (("spec", "ephemeralRunnerSpec"), {"runnerScaleSetId": 8}, True),
    (("status", "phase"), "Outdated", True),
    (("status", "appliedActionableRevision"), 4, True),
    # The AutoscalingRunnerSet copies these counts into its own status, so they are read (they
    # were dropped while no AutoscalingRunnerSet reconciler existed).
    (("status", "currentReplicas"), 3, True),
    (("status", "pendingEphemeralRunners"), 2, True),
    (("status", "runningEphemeralRunners"), 0, True),
    (("status", "failedEphemeralRunners"), 1, True),
    (("metadata", "resourceVersion"), "11", False),
    (("metadata", "managedFields"), [{"manager": "listener"}], False),
    (("status", "finishedRunnerCleanupPatchID"), 3, False),
]

ER_ROWS: list[Row] = [
    (("metadata", "labels"), {"x": "y"}, True),
    (("metadata", "annotations"), {"actions.github.com/patch-id": "2"}, True),
    (("metadata", "finalizers"), [], True),
    (("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z", True),
    (("metadata", "generation"), 2, True),
    (("spec", "githubConfigUrl"), "https://github.com/p", True),
    (("spec", "runnerScaleSetId"), 8, True),
    (("status", "phase"), "Running", True),
    (("status", "runnerId"), 13, True),
    (("metadata", "resourceVersion"), "21", False),
    (("metadata", "managedFields"), [{"manager": "listener"}], False),
    (("status", "ready"), True, False),
    (("status", "reason"), "Pending", False),
    (("status", "message"), "starting", False),
    (("status", "jobRequestId"), 99, False),
    (("status", "jobRepositoryName"), "o/r", False),
    (("status", "failures"), {"pod-uid": "2026-01-01T00:00:00Z"}, False),
]

POD_ROWS: list[Row] = [
    (("metadata", "uid"), "pod-uid-2", True),
    (("metadata", "deletionTimestamp"), "2026-01-01T00:00:00Z", True),
    # The pod as the reconciler reads it (`rules.read_pod`): a live runner container is one
    # value whatever the pod's phase, reason or message; an ended container or init container,
    # a failed pod, or a stuck wait is read.
    (("status", "phase"), "Failed", True),
    (
        ("status", "containerStatuses"),
        [{"name": "runner", "state": {"terminated": {"exitCode": 0}}}],
        True,
    ),
    (
        ("status", "initContainerStatuses"),
        [{"name": "init", "state": {"terminated": {"exitCode": 1}}}],
        True,
    ),
    (
        ("status", "containerStatuses"),
        [{"name": "runner", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
        True,
    ),
    (("status", "phase"), "Succeeded", False),
    (("status", "reason"), "Evicted", False),
    (("status", "message"), "node pressure", False),
    (("status", "containerStatuses"), [{"name": "runner", "ready": False}], False),
    (
        ("status", "containerStatuses"),
        [{"name": "runner", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        False,
    ),
    (("status", "initContainerStatuses"), [{"name": "init", "ready": True}], False),
    (
        ("status", "conditions"),
        [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        True,
    ),
    (("metadata", "resourceVersion"), "31", False),
    (("metadata", "labels"), {"app": "other"}, False),
    (("metadata", "annotations"), {"note": "b"}, False),
    (("spec", "nodeName"), "node-2", False),
    (("status", "podIP"), "10.0.0.2", False),
    (("status", "hostIP"), "192.168.0.2", False),
    (("status", "startTime"), "2026-01-02T00:00:00Z", False),
    (
        ("status", "conditions"),
        [{"type": "PodScheduled", "status": "False"}, {"type": "Ready", "status": "True"}],
        False,
    ),
]

CASES = (
    [
        pytest.param(ERS_TO_ARS, ers, path, value, passes, id=f"ers-{'.'.join(path)}-{passes}")
        for path, value, passes in ERS_ROWS
    ]
    + [
        pytest.param(ER_TO_ERS, er, path, value, passes, id=f"er-{'.'.join(path)}-{passes}")
        for path, value, passes in ER_ROWS
    ]
    + [
        pytest.param(POD_TO_ER, pod, path, value, passes, id=f"pod-{'.'.join(path)}-{value}")
        for path, value, passes in POD_ROWS
    ]
)


@pytest.mark.parametrize(("predicate", "make", "path", "value", "passes"), CASES)
def test_update_passes_only_when_a_projected_field_changes(
    predicate: ProjectionPredicate, make: Any, path: Path, value: object, passes: bool
) -> None:
    old = make()
    assert predicate.update(old, changed(old, path, value)) is passes


@pytest.mark.parametrize(
    ("predicate", "make"), [(ERS_TO_ARS, ers), (ER_TO_ERS, er), (POD_TO_ER, pod)]
)
def test_an_unchanged_update_is_dropped(predicate: ProjectionPredicate, make: Any) -> None:
    assert predicate.update(make(), make()) is False


@pytest.mark.parametrize(
    ("predicate", "other"),
    [
        (ERS_TO_ARS, er()),
        (ER_TO_ERS, pod()),
        (POD_TO_ER, ers()),
        (POD_TO_ER, {"kind": "Pod", "apiVersion": "v2"}),
        (ER_TO_ERS, "not an object"),
        (ERS_TO_ARS, None),
    ],
)
def test_objects_of_an_unexpected_type_always_pass(
    predicate: ProjectionPredicate, other: object
) -> None:
    assert predicate.update(other, copy.deepcopy(other)) is True


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "ContainersReady", "status": "True"}], False),
        ([], False),
        (None, False),
    ],
)
def test_pod_ready_reads_the_ready_condition(conditions: object, ready: bool) -> None:
    assert pod_ready({"status": {"conditions": conditions}}) is ready


# What each owner's reconciler reads, written out as paths independently of the projections
# (docs/controller-runtime.md#predicates); the property checks that a dropped update leaves all
# of them equal.
READS: dict[str, list[Path]] = {
    ERS_TO_ARS.name: [
        ("spec",),
        ("status", "phase"),
        ("status", "appliedActionableRevision"),
        ("status", "currentReplicas"),
        ("status", "pendingEphemeralRunners"),
        ("status", "runningEphemeralRunners"),
        ("status", "failedEphemeralRunners"),
    ],
    ER_TO_ERS.name: [("spec",), ("status", "phase"), ("status", "runnerId")],
    POD_TO_ER.name: [("metadata", "uid"), ("metadata", "deletionTimestamp")],
}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
RUNNERS: list[JSONDict] = [
    {"status": {"phase": "Pending", "runnerId": 1}},
    {"status": {"phase": "Running", "runnerId": 1, "jobId": "j"}},
]
READS_METADATA = {ERS_TO_ARS.name, ER_TO_ERS.name}


def lookup(obj: JSONDict, path: Path) -> object:
    """The value at `path` as a reconciler reads it: JSON null and absent are the same."""
    node: object = obj
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def read_view(predicate: ProjectionPredicate, obj: JSONDict) -> list[object]:
    view = [lookup(obj, path) for path in READS[predicate.name]]
    outdated = lookup(obj, ("status", "phase")) == "Outdated"
    if predicate.name in READS_METADATA:
        meta = dict(obj["metadata"])
        meta.pop("resourceVersion", None)
        meta.pop("managedFields", None)
        if predicate is ERS_TO_ARS and not outdated:
            # The listener's fields, and the generation they advance, only while Outdated.
            meta.pop("generation", None)
            view[0] = {k: v for k, v in obj["spec"].items() if k not in ("replicas", "patchID")}
        view.append(meta)
    if predicate is POD_TO_ER:
        # What the reconciler decides from the pod, for an idle and a busy runner that have
        # caught up with its readiness (a readiness change is read on its own, above).
        ready = pod_ready(obj)
        view.append(ready)
        policy = RunnerSettings().failure_policy()
        view += [
            decide_from_pod(
                {"status": {**runner["status"], "ready": ready}},
                obj,
                ready=ready,
                now=NOW,
                policy=policy,
            )
            for runner in RUNNERS
        ]
    return view


ROWS = {ERS_TO_ARS.name: ERS_ROWS, ER_TO_ERS.name: ER_ROWS, POD_TO_ER.name: POD_ROWS}
MAKERS = {ERS_TO_ARS.name: ers, ER_TO_ERS.name: er, POD_TO_ER.name: pod}

SCHEMA_LISTS = frozenset({"containerStatuses", "initContainerStatuses"})
values = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "a", "Running"])
)


@st.composite
def updates(draw: st.DrawFn) -> tuple[ProjectionPredicate, JSONDict, JSONDict]:
    predicate = draw(st.sampled_from([ERS_TO_ARS, ER_TO_ERS, POD_TO_ER]))
    old = MAKERS[predicate.name]()
    new = copy.deepcopy(old)
    paths = [path for path, _, _ in ROWS[predicate.name]]
    for path in draw(st.lists(st.sampled_from(paths), max_size=4)):
        if path[-1] in SCHEMA_LISTS:
            # The API server validates these as lists of objects: drawn from the rows.
            rows = [value for row_path, value, _ in ROWS[predicate.name] if row_path == path]
            value = draw(st.sampled_from([*rows, []]))
        else:
            value = draw(st.one_of(values, st.just([{"type": "Ready", "status": "True"}])))
        new = changed(new, path, value)
    return predicate, old, new


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates())
def test_a_dropped_update_leaves_everything_the_reconciler_reads_unchanged(
    update: tuple[ProjectionPredicate, JSONDict, JSONDict],
) -> None:
    predicate, old, new = update
    if not predicate.update(old, new):
        assert read_view(predicate, old) == read_view(predicate, new)
