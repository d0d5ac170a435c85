"""ARC's gha_* metrics: names, labels, buckets, and which events record what."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from listener.config import MetricsConfig, MetricSpec
from listener.metrics import DEFAULT_BUCKETS, ListenerMetrics, WorkflowRef, parse_workflow_ref
from shared.actions.models import JobCompleted, JobStarted, Statistics

SCALE_SET = {
    "name": "set",
    "namespace": "runners",
    "enterprise": "",
    "organization": "octo-org",
    "repository": "",
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def samples(metrics: ListenerMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


@pytest.fixture
def metrics() -> ListenerMetrics:
    return ListenerMetrics(None, scale_set_labels=SCALE_SET)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("o/r/.github/workflows/ci.yml@refs/heads/main", WorkflowRef("ci", "heads/main")),
        ("o/r/.github/workflows/ci.yaml@refs/heads/feat/x", WorkflowRef("ci", "heads/feat/x")),
        ("o/r/.github/workflows/rel.yml@refs/tags/v1.2", WorkflowRef("rel", "tags/v1.2")),
        ("o/r/.github/workflows/pr.yml@refs/pull/42/merge", WorkflowRef("pr", "pull/42")),
        ("o/r/.github/workflows/ci.yml", WorkflowRef()),
        ("", WorkflowRef()),
    ],
)
def test_parse_workflow_ref(ref: str, expected: WorkflowRef) -> None:
    assert parse_workflow_ref(ref) == expected


def test_gauges_carry_the_scale_set_labels_only(metrics: ListenerMetrics) -> None:
    metrics.record_static(min_runners=1, max_runners=5)
    metrics.record_statistics(
        Statistics(
            total_available_jobs=7,
            total_acquired_jobs=6,
            total_assigned_jobs=3,
            total_running_jobs=2,
            total_idle_runners=1,
        )
    )
    metrics.record_desired(4)
    got = samples(metrics)
    for name, value in [
        ("gha_min_runners", 1),
        ("gha_max_runners", 5),
        # ARC's pull request 4430: the queue before the scale set asks for a runner.
        ("gha_available_jobs", 7),
        ("gha_acquired_jobs", 6),
        ("gha_assigned_jobs", 3),
        ("gha_running_jobs", 2),
        ("gha_idle_runners", 1),
        ("gha_desired_runners", 4),
    ]:
        assert got[name] == [(SCALE_SET, value)]


def test_job_started_counts_and_times_startup(metrics: ListenerMetrics) -> None:
    metrics.record_job_started(
        JobStarted(
            owner_name="octo-org",
            repository_name="hello",
            job_display_name="build",
            event_name="push",
            scale_set_assign_time=T0,
            runner_assign_time=T0 + timedelta(seconds=7),
        )
    )
    got = samples(metrics)
    labels = {
        "enterprise": "",
        "organization": "octo-org",
        "repository": "hello",
        "job_name": "build",
        "event_name": "push",
    }
    assert got["gha_started_jobs_total"] == [(labels, 1.0)]
    assert got["gha_job_startup_duration_seconds_sum"] == [(labels, 7.0)]
    bounds = [float(s["le"]) for s, _ in got["gha_job_startup_duration_seconds_bucket"]]
    assert bounds == [*DEFAULT_BUCKETS, float("inf")]


def test_job_completed_carries_the_result(metrics: ListenerMetrics) -> None:
    metrics.record_job_completed(
        JobCompleted(
            owner_name="o",
            repository_name="r",
            result="failed",
            runner_assign_time=T0,
            finish_time=T0 + timedelta(seconds=90),
        )
    )
    got = samples(metrics)
    [(labels, value)] = got["gha_completed_jobs_total"]
    assert (labels["job_result"], value) == ("failed", 1.0)
    assert got["gha_job_execution_duration_seconds_sum"] == [(labels, 90.0)]


@pytest.mark.parametrize(
    ("start", "end", "seconds"),
    [
        # The truncated difference (1.2 s) would be 1; ARC's Unix() difference is 2.
        (T0 + timedelta(seconds=0.9), T0 + timedelta(seconds=2.1), 2.0),
        # 0.2 s across a second boundary: 1, where truncating gives 0.
        (T0 + timedelta(seconds=0.9), T0 + timedelta(seconds=1.1), 1.0),
    ],
)
def test_job_durations_are_differences_of_unix_seconds_as_arcs(
    metrics: ListenerMetrics, start: datetime, end: datetime, seconds: float
) -> None:
    """ARC records `RunnerAssignTime.Unix() - ScaleSetAssignTime.Unix()` (and FinishTime's):
    dashboards that compare the two projects see the same sums."""
    metrics.record_job_started(
        JobStarted(
            owner_name="o",
            repository_name="r",
            scale_set_assign_time=start,
            runner_assign_time=end,
        )
    )
    metrics.record_job_completed(
        JobCompleted(
            owner_name="o",
            repository_name="r",
            result="succeeded",
            runner_assign_time=start,
            finish_time=end,
        )
    )
    got = samples(metrics)
    [(_, startup)] = got["gha_job_startup_duration_seconds_sum"]
    [(_, execution)] = got["gha_job_execution_duration_seconds_sum"]
    assert (startup, execution) == (seconds, seconds)


def test_job_completed_without_runner_is_not_counted(metrics: ListenerMetrics) -> None:
    metrics.record_job_completed(JobCompleted(result="canceled"))
    assert "gha_completed_jobs_total" not in samples(metrics)


def test_config_selects_metrics_labels_and_buckets() -> None:
    config = MetricsConfig(
        counters={"gha_started_jobs_total": MetricSpec(labels=["job_workflow_target"])},
        gauges={"gha_not_a_metric": MetricSpec(labels=["name"])},
        histograms={
            "gha_job_startup_duration_seconds": MetricSpec(labels=[], buckets=[1.0, 10.0]),
            "gha_started_jobs_total": MetricSpec(labels=[]),
        },
    )
    metrics = ListenerMetrics(config, scale_set_labels=SCALE_SET)
    metrics.record_desired(2)
    metrics.record_job_started(
        JobStarted(
            job_workflow_ref="o/r/.github/workflows/ci.yml@refs/tags/v1",
            scale_set_assign_time=T0,
            runner_assign_time=T0,
        )
    )
    got = samples(metrics)
    assert "gha_desired_runners" not in got
    assert got["gha_started_jobs_total"] == [({"job_workflow_target": "tags/v1"}, 1.0)]
    assert [s["le"] for s, _ in got["gha_job_startup_duration_seconds_bucket"]] == [
        "1.0",
        "10.0",
        "+Inf",
    ]
