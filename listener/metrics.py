"""ARC's listener metrics (docs/listener.md, "Telemetry"): same names, labels and buckets.

A dashboard built for ARC's listener reads these unchanged. Which metrics exist and with which
labels follows ARC's `metrics` config key; without it, ARC's default set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from listener.config import MetricsConfig, MetricSpec
from shared.actions.models import JobCompleted, JobMessageBase, JobStarted, Statistics
from shared.telemetry.metrics import Metrics

log = logging.getLogger(__name__)

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.01, 0.05, 0.1, 0.5,
    *range(1, 11),
    12, 15, 18, 20, 25, 30,
    *range(40, 121, 10),
    150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800, 2400, 3000, 3600,
)  # fmt: skip

_SCALE_SET_LABELS = ["name", "namespace", "repository", "organization", "enterprise"]
_JOB_LABELS = ["repository", "organization", "enterprise", "job_name", "event_name"]

GAUGES: dict[str, str] = {
    "gha_assigned_jobs": "Number of jobs assigned to this scale set.",
    "gha_running_jobs": "Number of jobs running (or about to be run).",
    "gha_registered_runners": "Number of runners registered by the scale set.",
    "gha_busy_runners": "Number of registered runners running a job.",
    "gha_min_runners": "Minimum number of runners.",
    "gha_max_runners": "Maximum number of runners.",
    "gha_desired_runners": "Number of runners desired by the scale set.",
    "gha_idle_runners": "Number of registered runners not running a job.",
}
COUNTERS: dict[str, str] = {
    "gha_started_jobs_total": "Total number of jobs started.",
    "gha_completed_jobs_total": "Total number of jobs completed.",
}
HISTOGRAMS: dict[str, str] = {
    "gha_job_startup_duration_seconds": "Time spent waiting for workflow job to get started on "
    "the runner owned by the scale set (in seconds).",
    "gha_job_execution_duration_seconds": "Time spent executing workflow jobs by the scale set "
    "(in seconds).",
}

DEFAULT_METRICS = MetricsConfig(
    gauges={name: MetricSpec(labels=_SCALE_SET_LABELS) for name in GAUGES},
    counters={
        "gha_started_jobs_total": MetricSpec(labels=_JOB_LABELS),
        "gha_completed_jobs_total": MetricSpec(labels=[*_JOB_LABELS, "job_result"]),
    },
    histograms={
        "gha_job_startup_duration_seconds": MetricSpec(
            labels=_JOB_LABELS, buckets=list(DEFAULT_BUCKETS)
        ),
        "gha_job_execution_duration_seconds": MetricSpec(
            labels=[*_JOB_LABELS, "job_result"], buckets=list(DEFAULT_BUCKETS)
        ),
    },
)


@dataclass(frozen=True, slots=True)
class WorkflowRef:
    name: str = ""
    target: str = ""


def parse_workflow_ref(ref: str) -> WorkflowRef:
    """`owner/repo/.github/workflows/ci.yml@refs/heads/main` -> name `ci`, target `heads/main`.

    Pull requests give `pull/<n>` (from `refs/pull/<n>/merge`), tags `tags/<tag>`.
    """
    path, sep, git_ref = ref.partition("@")
    if not sep:
        return WorkflowRef()
    file_name = path.rsplit("/", 1)[-1]
    name = file_name.removesuffix(".yml").removesuffix(".yaml")
    target = ""
    if git_ref.startswith(("refs/heads/", "refs/tags/")):
        target = git_ref.removeprefix("refs/")
    elif git_ref.startswith("refs/pull/"):
        number = git_ref.removeprefix("refs/pull/").split("/", 1)[0]
        target = f"pull/{number}" if number else ""
    return WorkflowRef(name=name, target=target)


class _Selected:
    """One configured instrument and the label names it carries."""

    def __init__(self, record: Callable[..., Any], labels: list[str]) -> None:
        self._record = record
        self._labels = labels

    def __call__(self, value: float, values: Mapping[str, str]) -> None:
        self._record(value, {name: values.get(name, "") for name in self._labels})


class ListenerMetrics:
    """The gha_* instruments this listener's config asks for, rendered as Prometheus text."""

    def __init__(
        self,
        config: MetricsConfig | None,
        *,
        scale_set_labels: Mapping[str, str],
    ) -> None:
        config = config or DEFAULT_METRICS
        buckets: dict[str, Sequence[float]] = {
            name: spec.buckets or DEFAULT_BUCKETS
            for name, spec in config.histograms.items()
            if name in HISTOGRAMS
        }
        self.metrics = Metrics("gha-listener", histogram_buckets=buckets, scope_labels=False)
        self._scale_set_labels = dict(scale_set_labels)
        self._enterprise = scale_set_labels.get("enterprise", "")
        self._instruments: dict[str, _Selected] = {}
        sections: list[tuple[str, dict[str, MetricSpec], dict[str, str]]] = [
            ("gauges", config.gauges, GAUGES),
            ("counters", config.counters, COUNTERS),
            ("histograms", config.histograms, HISTOGRAMS),
        ]
        for section, specs, known in sections:
            for name, spec in specs.items():
                if name not in known:
                    log.warning("metrics.%s: ignoring unknown metric %s", section, name)
                    continue
                record = self._instrument(section, name, description=known[name])
                self._instruments[name] = _Selected(record, spec.labels)

    def _instrument(self, section: str, name: str, *, description: str) -> Callable[..., Any]:
        """The recording method of a new instrument of the section's kind."""
        meter = self.metrics.meter
        if section == "gauges":
            return meter.create_gauge(name, description=description).set
        if section == "counters":
            return meter.create_counter(name, description=description).add
        return meter.create_histogram(name, description=description).record

    def _emit(self, name: str, value: float, *, labels: Mapping[str, str]) -> None:
        instrument = self._instruments.get(name)
        if instrument is not None:
            instrument(value, labels)

    def record_static(self, *, min_runners: int, max_runners: int) -> None:
        self._emit("gha_min_runners", min_runners, labels=self._scale_set_labels)
        self._emit("gha_max_runners", max_runners, labels=self._scale_set_labels)

    def record_statistics(self, stats: Statistics) -> None:
        for name, value in (
            ("gha_assigned_jobs", stats.total_assigned_jobs),
            ("gha_running_jobs", stats.total_running_jobs),
            ("gha_registered_runners", stats.total_registered_runners),
            ("gha_busy_runners", stats.total_busy_runners),
            ("gha_idle_runners", stats.total_idle_runners),
        ):
            self._emit(name, value, labels=self._scale_set_labels)

    def record_desired(self, count: int) -> None:
        self._emit("gha_desired_runners", count, labels=self._scale_set_labels)

    def _job_labels(self, job: JobMessageBase, result: str | None = None) -> dict[str, str]:
        ref = parse_workflow_ref(job.job_workflow_ref)
        values = {
            "enterprise": self._enterprise,
            "organization": job.owner_name,
            "repository": job.repository_name,
            "job_name": job.job_display_name,
            "event_name": job.event_name,
            "job_workflow_ref": job.job_workflow_ref,
            "job_workflow_name": ref.name,
            "job_workflow_target": ref.target,
        }
        if result is not None:
            values["job_result"] = result
        return values

    def record_job_started(self, job: JobStarted) -> None:
        labels = self._job_labels(job)
        self._emit("gha_started_jobs_total", 1, labels=labels)
        startup = _whole_seconds(job.scale_set_assign_time, job.runner_assign_time)
        if startup is not None:
            self._emit("gha_job_startup_duration_seconds", startup, labels=labels)

    def record_job_completed(self, job: JobCompleted) -> None:
        # A job that never reached a runner (canceled while queued) is not a completion.
        if job.runner_assign_time is None:
            return
        labels = self._job_labels(job, job.result)
        self._emit("gha_completed_jobs_total", 1, labels=labels)
        execution = _whole_seconds(job.runner_assign_time, job.finish_time)
        if execution is not None:
            self._emit("gha_job_execution_duration_seconds", execution, labels=labels)

    def render(self) -> bytes:
        return self.metrics.render()

    def shutdown(self) -> None:
        self.metrics.shutdown()


def _whole_seconds(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds())
