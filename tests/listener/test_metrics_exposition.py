"""The text the listener's metrics endpoint serves, to the byte: the same as when the gha_*
series went through OpenTelemetry's metrics SDK and its Prometheus exporter, which dashboards
and alerts were written against (listener/metrics.py says what differs with prometheus_client's
own metric classes)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from listener.config import MetricsConfig, MetricSpec
from listener.metrics import ListenerMetrics
from shared.actions.models import JobCompleted

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = MetricsConfig(
    gauges={
        "gha_desired_runners": MetricSpec(labels=[]),
        "gha_max_runners": MetricSpec(labels=["namespace", "name"]),
    },
    counters={"gha_completed_jobs_total": MetricSpec(labels=["job_result", "repository"])},
    histograms={
        "gha_job_execution_duration_seconds": MetricSpec(
            labels=["repository"], buckets=[1, 60, 1e6]
        )
    },
)
EXPECTED = """\
# HELP gha_desired_runners Number of runners desired by the scale set.
# TYPE gha_desired_runners gauge
gha_desired_runners 3.0
# HELP gha_max_runners Maximum number of runners.
# TYPE gha_max_runners gauge
gha_max_runners{name="set",namespace="runners"} 5.0
# HELP gha_completed_jobs_total Total number of jobs completed.
# TYPE gha_completed_jobs_total counter
gha_completed_jobs_total{job_result="succeeded",repository="r"} 2.0
gha_completed_jobs_total{job_result="failed",repository="r"} 1.0
# HELP gha_job_execution_duration_seconds Time spent executing workflow jobs by the scale set \
(in seconds).
# TYPE gha_job_execution_duration_seconds histogram
gha_job_execution_duration_seconds_bucket{le="1.0",repository="r"} 0.0
gha_job_execution_duration_seconds_bucket{le="60.0",repository="r"} 1.0
gha_job_execution_duration_seconds_bucket{le="1000000.0",repository="r"} 2.0
gha_job_execution_duration_seconds_bucket{le="+Inf",repository="r"} 2.0
gha_job_execution_duration_seconds_count{repository="r"} 2.0
gha_job_execution_duration_seconds_sum{repository="r"} 7260.0
"""


def completed(result: str, seconds: int) -> JobCompleted:
    return JobCompleted(
        repository_name="r",
        result=result,
        runner_assign_time=T0,
        finish_time=T0 + timedelta(seconds=seconds),
    )


def test_the_exposition_is_the_exporters(caplog: pytest.LogCaptureFixture) -> None:
    """A family appears with its first sample (a label-less gauge is not 0 before), families and
    series in the order first recorded, labels sorted, no `_created` series, a bound of a
    million written as Python writes it, and a negative duration left out with a warning."""
    metrics = ListenerMetrics(CONFIG, scale_set_labels={"name": "set", "namespace": "runners"})
    assert metrics.render() == b""
    metrics.record_desired(2)
    metrics.record_static(min_runners=0, max_runners=5)
    for result, seconds in [("succeeded", 60), ("failed", -1), ("succeeded", 7200)]:
        with caplog.at_level(logging.WARNING, logger="listener.metrics"):
            metrics.record_job_completed(completed(result, seconds))
    metrics.record_desired(3)
    assert metrics.render().decode() == EXPECTED
    assert [r.getMessage() for r in caplog.records] == [
        "gha_job_execution_duration_seconds: ignoring a negative duration (-1 s)"
    ]


@pytest.mark.parametrize("buckets", [[10.0, 1.0], [1.0, 1.0], [1.0, float("inf")]])
def test_buckets_that_are_not_finite_and_increasing_are_refused_at_start(
    buckets: list[float],
) -> None:
    """Before: accepted at start, and the first job completed raised from the exporter."""
    config = MetricsConfig(
        histograms={"gha_job_execution_duration_seconds": MetricSpec(buckets=buckets)}
    )
    with pytest.raises(ValueError, match="buckets must be finite and increasing"):
        ListenerMetrics(config, scale_set_labels={})
