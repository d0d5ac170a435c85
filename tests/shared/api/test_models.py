"""The CRD models: ARC objects round-trip, invalid ones are rejected with the field path."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.api import (
    AutoscalingRunnerSet,
    AutoscalingRunnerSetPhase,
    AutoscalingRunnerSetSpec,
    EphemeralRunner,
    EphemeralRunnerPhase,
    EphemeralRunnerSet,
    EphemeralRunnerSetSpec,
    EphemeralRunnerSpec,
    EphemeralRunnerStatus,
    InvalidResourceError,
    ObjectMeta,
    is_terminal_phase,
    parse_resource,
)
from shared.api.names import MAX_RUNNERS_UNBOUNDED
from tests.shared.api.conftest import load_fixture

ARS = "arc-autoscalingrunnerset.yaml"
AL = "arc-autoscalinglistener.yaml"
ERS = "arc-ephemeralrunnerset.yaml"
ER = "arc-ephemeralrunner.yaml"
ARC_OBJECTS = [ARS, AL, ERS, ER]
HOOKS = "ACTIONS_RUNNER_CONTAINER_HOOKS"


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of obj with the dotted path set (`[n]` indexes a list)."""
    out = copy.deepcopy(obj)
    node: Any = out
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part[1:-1])] if part.startswith("[") else node.setdefault(part, {})
    node[last] = value
    return out


def _delete(obj: dict[str, Any], path: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    del node[last]
    return out


@pytest.mark.parametrize("fixture", ARC_OBJECTS)
def test_arc_object_dumps_back_unchanged(fixture: str) -> None:
    raw = load_fixture(fixture)
    assert parse_resource(raw).to_wire() == raw


@pytest.mark.parametrize("fixture", ARC_OBJECTS)
def test_dump_loads_back_to_an_equal_model(fixture: str) -> None:
    model = parse_resource(load_fixture(fixture))
    assert parse_resource(model.to_wire()) == model


@pytest.mark.parametrize(
    ("fixture", "path"),
    [
        (ARS, "spec.template.spec.hostNetwork"),
        (ARS, "spec.template.spec.containers.[0].securityContext"),
        (ARS, "spec.template.metadata.creationTimestamp"),
        (ARS, "spec.proxy.https.futureField"),
        (ARS, "spec.githubServerTLS.certificateFrom.futureField"),
        (ARS, "metadata.deletionGracePeriodSeconds"),
        (ER, "spec.spec.containers.[0].env.[0].futureField"),
    ],
)
def test_embedded_kubernetes_types_keep_unknown_fields(fixture: str, path: str) -> None:
    raw = _set(load_fixture(fixture), path, {"kept": True})
    assert parse_resource(raw).to_wire() == raw


INVALID = [
    # (fixture, path to change, new value, path in the error)
    (ARS, "spec.minRunners", 51, "spec.minRunners"),
    (ARS, "spec.maxRunners", -1, "spec.maxRunners"),
    (ARS, "spec.minRunners", -1, "spec.minRunners"),
    (ARS, "spec.maxRunners", "5", "spec.maxRunners"),
    (ARS, "spec.maxRunners", 5.5, "spec.maxRunners"),
    (
        ARS,
        "spec.runnerScaleSetLabels",
        "linux",
        "spec.runnerScaleSetLabels",
    ),
    (ARS, "spec.minRunner", 1, "spec.minRunner"),
    (
        ARS,
        "spec.template.spec.containers.[0].name",
        7,
        "spec.template.spec.containers[0].name",
    ),
    (ARS, "metadata.labels.tier", 1.0, "metadata.labels.tier"),
    (ARS, "status.phase", "Ready", "status.phase"),
    (ARS, "apiVersion", "actions.github.com/v1", "apiVersion"),
    (AL, "spec.minRunners", 51, "spec.minRunners"),
    (AL, "status.ready", True, "status.ready"),
    (ERS, "spec.replicas", -2, "spec.replicas"),
    (ERS, "spec.patchID", "17", "spec.patchID"),
    (ERS, "status.phase", "Pending", "status.phase"),
    (ER, "status.phase", "Unknown", "status.phase"),
    (ER, "status.ready", "true", "status.ready"),
    (
        ER,
        "status.failures.pod-uid",
        "2026-11-30T09:20:40",
        "status.failures.pod-uid",
    ),
    (ER, "spec.runnerScaleSetId", None, "spec.runnerScaleSetId"),
]


@pytest.mark.parametrize(("fixture", "path", "value", "error_path"), INVALID)
def test_invalid_object_is_rejected_with_the_field_path(
    fixture: str, path: str, value: Any, error_path: str
) -> None:
    raw = _set(load_fixture(fixture), path, value)
    with pytest.raises(InvalidResourceError) as caught:
        parse_resource(raw)
    assert [p for p, _ in caught.value.problems] == [error_path]
    assert f"{error_path}: " in str(caught.value)


@pytest.mark.parametrize(
    ("fixture", "path"),
    [
        (ERS, "spec.patchID"),
        (ERS, "status.currentReplicas"),
        (ER, "spec.githubConfigUrl"),
        (ER, "spec.githubConfigSecret"),
        (ER, "spec.runnerScaleSetId"),
    ],
)
def test_field_required_by_the_arc_schema_is_required(fixture: str, path: str) -> None:
    with pytest.raises(InvalidResourceError) as caught:
        parse_resource(_delete(load_fixture(fixture), path))
    assert caught.value.problems == [(path, "Field required")]


def test_min_above_max_names_both_values() -> None:
    raw = _set(load_fixture(ARS), "spec.minRunners", 51)
    with pytest.raises(InvalidResourceError, match=r"spec\.minRunners: .*maxRunners \(51 > 50\)"):
        parse_resource(raw)


def test_error_names_the_object() -> None:
    raw = _set(load_fixture(ER), "status.phase", "Unknown")
    with pytest.raises(InvalidResourceError, match=r"^invalid EphemeralRunner arc-runners/arc-"):
        parse_resource(raw)


@pytest.mark.parametrize("kind", [None, "Pod", "ephemeralrunner"])
def test_unknown_kind_is_rejected(kind: str | None) -> None:
    raw = _set(load_fixture(ER), "kind", kind)
    with pytest.raises(InvalidResourceError) as caught:
        parse_resource(raw)
    assert [p for p, _ in caught.value.problems] == ["kind"]


@pytest.mark.parametrize(
    ("fixture", "model"),
    [
        (ARS, AutoscalingRunnerSet),
        (ERS, EphemeralRunnerSet),
        (ER, EphemeralRunner),
    ],
)
def test_parse_resource_picks_the_model_by_kind(fixture: str, model: type) -> None:
    assert type(parse_resource(load_fixture(fixture))) is model


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [
        (EphemeralRunnerPhase.PENDING, False),
        (EphemeralRunnerPhase.RUNNING, False),
        (EphemeralRunnerPhase.SUCCEEDED, True),
        (EphemeralRunnerPhase.FAILED, True),
        (EphemeralRunnerPhase.OUTDATED, True),
    ],
)
def test_terminal_phases(phase: EphemeralRunnerPhase, terminal: bool) -> None:
    assert phase.is_terminal is terminal
    assert is_terminal_phase(phase.value) is terminal


@pytest.mark.parametrize("raw", [None, "", "Unknown", "failed"])
def test_unknown_raw_phase_is_not_terminal(raw: str | None) -> None:
    assert is_terminal_phase(raw) is False


@pytest.mark.parametrize(
    ("status", "done"),
    [
        (None, False),
        ({}, False),
        ({"phase": "Running"}, False),
        ({"phase": "Outdated"}, True),
        ({"phase": "Failed"}, True),
    ],
)
def test_runner_is_done_only_in_a_terminal_phase(status: dict[str, Any] | None, done: bool) -> None:
    raw = load_fixture(ER)
    raw = _delete(raw, "status") if status is None else _set(raw, "status", status)
    assert EphemeralRunner.model_validate(raw).is_done() is done


@pytest.mark.parametrize(
    ("status", "busy"),
    [
        (None, False),
        ({}, False),
        ({"jobId": ""}, False),
        ({"jobId": "6d5c"}, True),
        # The same rule as shared.api.views.has_job: a job request id alone counts.
        ({"jobRequestId": 42}, True),
    ],
)
def test_runner_has_a_job_when_the_job_id_is_set(status: dict[str, Any] | None, busy: bool) -> None:
    raw = load_fixture(ER)
    raw = _delete(raw, "status") if status is None else _set(raw, "status", status)
    assert EphemeralRunner.model_validate(raw).has_job() is busy


@pytest.mark.parametrize(
    ("containers", "hooks"),
    [
        (
            [{"name": "runner", "env": [{"name": HOOKS, "value": "x"}]}],
            True,
        ),
        ([{"name": "runner"}], False),
        ([{"name": "sidecar", "env": [{"name": HOOKS}]}], False),
        # Only the first container named runner counts, as in ARC.
        (
            [
                {"name": "runner"},
                {"name": "runner", "env": [{"name": HOOKS}]},
            ],
            False,
        ),
    ],
)
def test_container_hook_detection(containers: list[dict[str, Any]], hooks: bool) -> None:
    raw = _set(load_fixture(ER), "spec.spec.containers", containers)
    assert EphemeralRunner.model_validate(raw).has_container_hook_configured() is hooks


def test_deletion_timestamp_marks_the_object_as_deleting() -> None:
    raw = load_fixture(ER)
    assert not EphemeralRunner.model_validate(raw).is_deleting
    raw = _set(raw, "metadata.deletionTimestamp", "2026-11-30T10:00:00Z")
    assert EphemeralRunner.model_validate(raw).is_deleting


def test_last_failure_is_the_latest_recorded() -> None:
    status = EphemeralRunnerStatus.model_validate(
        {"failures": {"a": "2026-11-30T09:20:40Z", "b": "2026-11-30T09:25:00Z"}}
    )
    assert status.last_failure() == datetime(2026, 11, 30, 9, 25, tzinfo=UTC)
    assert EphemeralRunnerStatus().last_failure() is None


def test_times_are_written_in_utc_with_a_z() -> None:
    status = EphemeralRunnerStatus.model_validate({"failures": {"a": "2026-11-30T11:20:40+02:00"}})
    assert status.to_wire() == {"failures": {"a": "2026-11-30T09:20:40Z"}}


@pytest.mark.parametrize(
    ("spec", "minimum", "maximum"),
    [({}, 0, MAX_RUNNERS_UNBOUNDED), ({"minRunners": 2, "maxRunners": 0}, None, None)],
)
def test_runner_bounds_defaults(
    spec: dict[str, Any], minimum: int | None, maximum: int | None
) -> None:
    if minimum is None:
        with pytest.raises(ValueError, match="minRunners"):
            AutoscalingRunnerSetSpec.model_validate(spec)
        return
    parsed = AutoscalingRunnerSetSpec.model_validate(spec)
    assert (parsed.effective_min_runners, parsed.effective_max_runners) == (minimum, maximum)


def test_blank_set_phase_written_by_go_is_treated_as_unset() -> None:
    raw = _set(load_fixture(ARS), "status.phase", "")
    ars = AutoscalingRunnerSet.model_validate(raw)
    assert ars.status is not None
    assert ars.status.phase is None
    assert "phase" not in ars.to_wire()["status"]


def test_object_built_in_python_dumps_only_what_was_set() -> None:
    ers = EphemeralRunnerSet(
        metadata=ObjectMeta(name="set", namespace="ns"),
        spec=EphemeralRunnerSetSpec(
            patch_id=0,
            ephemeral_runner_spec=EphemeralRunnerSpec(
                github_config_url="https://github.com/o",
                github_config_secret="s",
                runner_scale_set_id=3,
            ),
        ),
    )
    assert ers.to_wire() == {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "set", "namespace": "ns"},
        "spec": {
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": "https://github.com/o",
                "githubConfigSecret": "s",
                "runnerScaleSetId": 3,
            },
        },
    }


def test_assigned_fields_reach_the_wire() -> None:
    runner = EphemeralRunner.model_validate(load_fixture(ER))
    assert runner.status is not None
    runner.status.phase = EphemeralRunnerPhase.FAILED
    runner.status.reason = "InvalidPod"
    assert runner.to_wire()["status"]["phase"] == "Failed"
    assert runner.to_wire()["status"]["reason"] == "InvalidPod"


def test_snake_case_and_wire_names_build_the_same_model() -> None:
    by_alias = AutoscalingRunnerSetSpec.model_validate(
        {"githubConfigUrl": "u", "githubServerTLS": {}, "minRunners": 1}
    )
    by_name = AutoscalingRunnerSetSpec.model_validate(
        {"github_config_url": "u", "github_server_tls": {}, "min_runners": 1}
    )
    assert by_alias == by_name
    assert by_name.to_wire() == {"githubConfigUrl": "u", "githubServerTLS": {}, "minRunners": 1}


@pytest.mark.parametrize(
    ("model", "field", "wire"),
    [
        (EphemeralRunnerSetSpec, "patch_id", "patchID"),
        (EphemeralRunnerSetSpec, "actionable_revision", "actionableRevision"),
        (AutoscalingRunnerSetSpec, "github_server_tls", "githubServerTLS"),
        (AutoscalingRunnerSetSpec, "autoscaling_listener", "autoscalingListener"),
        (EphemeralRunnerStatus, "job_request_id", "jobRequestId"),
        (EphemeralRunnerStatus, "workflow_run_id", "workflowRunId"),
        (EphemeralRunnerSpec, "runner_scale_set_id", "runnerScaleSetId"),
    ],
)
def test_irregular_wire_names(model: type[Any], field: str, wire: str) -> None:
    assert model.model_fields[field].alias == wire


def test_newer_upstream_status_fields() -> None:
    ers = EphemeralRunnerSet.model_validate(load_fixture(ERS))
    assert ers.status is not None
    assert ers.spec.actionable_revision == 4
    assert ers.status.applied_actionable_revision == 4
    assert ers.status.finished_runner_cleanup_patch_id == 16


def test_set_phase_enum_values() -> None:
    assert [p.value for p in AutoscalingRunnerSetPhase] == ["Pending", "Running", "Outdated"]
