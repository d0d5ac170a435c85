"""The listener serves every gha_* series ARC's Grafana dashboard queries of it
(docs/metrics.md#arcs-grafana-dashboard)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from listener.metrics import ListenerMetrics
from shared.actions.models import JobCompleted, JobStarted, Statistics

# (sample name, labels the dashboard's query selects on that the process itself must carry);
# its actions_github_com_scale_set_* labels come from the scrape of the pod (docs/metrics.md).
DASHBOARD = [
    ("gha_job_startup_duration_seconds_bucket", {"le"}),
    ("gha_job_execution_duration_seconds_bucket", {"le"}),
    ("gha_assigned_jobs", {"namespace"}),
    ("gha_desired_runners", {"namespace"}),
    ("gha_idle_runners", {"namespace"}),
    ("gha_running_jobs", set()),
    ("gha_registered_runners", {"namespace"}),
]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_every_series_arcs_dashboard_queries_is_served() -> None:
    metrics = ListenerMetrics(None, scale_set_labels={"name": "arc", "namespace": "arc-runners"})
    metrics.record_static(min_runners=0, max_runners=5)
    metrics.record_statistics(
        Statistics(total_assigned_jobs=1, total_running_jobs=1, total_registered_runners=1)
    )
    metrics.record_desired(1)
    job: dict[str, Any] = {"owner_name": "o", "repository_name": "r", "runner_assign_time": T0}
    metrics.record_job_started(JobStarted(**job, scale_set_assign_time=T0))
    metrics.record_job_completed(
        JobCompleted(**job, result="succeeded", finish_time=T0 + timedelta(seconds=5))
    )
    samples: dict[str, list[set[str]]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(set(sample.labels))
    assert [name for name, _ in DASHBOARD if name not in samples] == []
    for name, labels in DASHBOARD:
        assert all(labels <= have for have in samples[name]), name
