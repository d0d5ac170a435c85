"""ARC's listener metrics (docs/listener.md, "Telemetry"): same names, labels and buckets.

A dashboard built for ARC's listener reads these unchanged. Which metrics exist and with which
labels follows ARC's `metrics` config key; without it, ARC's default set.

The series are kept here and rendered by prometheus_client, without OpenTelemetry's metrics SDK
and its Prometheus exporter, which cost the listener about 1 MB (docs/listener.md#memory).
prometheus_client's own Gauge, Counter and Histogram do not render what that exporter did (and
what dashboards and alerts read): they add `_created` series, write a family before its first
sample and a label-less one as 0 from the start, and format bounds of a million and more as
`1e+06`. So the few lines of aggregation below keep the exporter's output: a family appears with
its first sample, families and series in the order first recorded, labels sorted by name, bounds
written as Python writes them, negative durations ignored with a warning.
"""

from __future__ import annotations

import logging
import math
import re
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import accumulate, pairwise
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from listener.config import MetricsConfig, MetricSpec
from shared.actions.models import JobCompleted, JobMessageBase, JobStarted, Statistics
from shared.api.timeline import Timeline

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
    # ARC's pull request 4430 (its issue 4429): two counts of each statistics message that ARC
    # parsed and dropped, the queue before a runner is asked for.
    "gha_available_jobs": "Number of jobs with matching runs-on labels waiting to be acquired "
    "by this scale set.",
    "gha_acquired_jobs": "Number of jobs acquired by this scale set and not yet assigned to a "
    "runner.",
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

STAGE_LABELS = [*_SCALE_SET_LABELS, "stage"]
CAPACITY_WAIT_LABELS = list(_SCALE_SET_LABELS)
STAGE_HISTOGRAM = "gha_job_stage_duration_seconds"
CAPACITY_WAITS = "gha_jobs_waited_at_max_runners_total"
TIMELINE_METRICS: dict[str, str] = {
    STAGE_HISTOGRAM: "Time a job spent in each stage between being offered to the scale set and "
    "starting on its runner (in seconds; docs/job-timeline.md).",
    CAPACITY_WAITS: "Total number of jobs that waited for a runner because the scale set was at "
    "maxRunners.",
}
"""Always on, outside ARC's `metrics` config: series of this project, not ARC's."""

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


Attributes = tuple[tuple[str, str], ...]
"""One series: (label name as configured, value) pairs."""

Point = TypeVar("Point")

_NOT_IN_LABEL_NAME = re.compile(r"[^a-zA-Z0-9]+")


def _label_name(key: str) -> str:
    """A configured label name as the exporter wrote it: a leading digit, and each run of
    characters other than letters and digits, replaced by "_"."""
    if key[:1].isdigit():
        key = "_" + key[1:]
    return _NOT_IN_LABEL_NAME.sub("_", key)


class _Instrument(ABC, Generic[Point]):
    """One metric's series, each with its value, in the order first recorded."""

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description
        self.series: dict[Attributes, Point] = {}

    @abstractmethod
    def record(self, value: float, attributes: Attributes) -> None: ...

    @abstractmethod
    def family(self) -> Metric: ...

    def label_rows(self) -> tuple[list[str], list[list[str]]]:
        """The label names, sorted, and each series' values in that order."""
        rows = [{_label_name(key): value for key, value in series} for series in self.series]
        names = sorted({name for row in rows for name in row})
        return names, [[row.get(name, "") for name in names] for row in rows]


class _Gauge(_Instrument[float]):
    def record(self, value: float, attributes: Attributes) -> None:
        self.series[attributes] = value

    def family(self) -> Metric:
        names, rows = self.label_rows()
        family = GaugeMetricFamily(self.name, self.description, labels=names)
        for row, value in zip(rows, self.series.values(), strict=True):
            family.add_metric(row, value)
        return family


class _Counter(_Instrument[float]):
    def record(self, value: float, attributes: Attributes) -> None:
        self.series[attributes] = self.series.get(attributes, 0) + value

    def family(self) -> Metric:
        names, rows = self.label_rows()
        family = CounterMetricFamily(self.name, self.description, labels=names)
        for row, value in zip(rows, self.series.values(), strict=True):
            family.add_metric(row, value)
        return family


@dataclass(slots=True)
class _Buckets:
    counts: list[int]
    """Per bucket, not cumulative; the last one is +Inf's."""
    total: float = 0


class _Histogram(_Instrument[_Buckets]):
    """Buckets as the exporter's explicit-bucket histogram counted them. Bounds that are not
    finite and increasing are refused here, when the listener starts; the exporter refused them
    at the first value recorded."""

    def __init__(self, name: str, description: str, bounds: Sequence[float]) -> None:
        super().__init__(name, description)
        self.bounds = list(bounds)
        finite = all(math.isfinite(bound) for bound in self.bounds)
        if not finite or any(low >= high for low, high in pairwise(self.bounds)):
            raise ValueError(f"{name}: buckets must be finite and increasing, not {list(bounds)}")

    def record(self, value: float, attributes: Attributes) -> None:
        if value < 0:
            # A job whose finish time is before its runner assign time (clock skew).
            log.warning("%s: ignoring a negative duration (%s s)", self.name, value)
            return
        buckets = self.series.setdefault(attributes, _Buckets([0] * (len(self.bounds) + 1)))
        # bisect_left: a value equal to a bound counts in that bound's bucket (le).
        buckets.counts[bisect_left(self.bounds, value)] += 1
        buckets.total += value

    def family(self) -> Metric:
        names, rows = self.label_rows()
        family = HistogramMetricFamily(self.name, self.description, labels=names)
        bounds = [*(f"{bound}" for bound in self.bounds), "+Inf"]
        for row, buckets in zip(rows, self.series.values(), strict=True):
            cumulative = list(zip(bounds, accumulate(buckets.counts), strict=True))
            family.add_metric(row, cumulative, sum_value=buckets.total)
        return family


class Series(Collector):
    """The instruments recorded so far, as a prometheus_client collector of its own registry:
    several listeners in one process (or test) do not share series."""

    def __init__(self) -> None:
        self._recorded: dict[str, _Instrument[Any]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def record(self, instrument: _Instrument[Any], value: float, attributes: Attributes) -> None:
        instrument.record(value, attributes)
        if instrument.series:
            self._recorded.setdefault(instrument.name, instrument)

    def collect(self) -> Iterator[Metric]:
        for instrument in self._recorded.values():
            yield instrument.family()


class _Selected:
    """One configured instrument and the label names it carries."""

    def __init__(self, series: Series, instrument: _Instrument[Any], labels: list[str]) -> None:
        self._series = series
        self._instrument = instrument
        self._labels = labels

    def __call__(self, value: float, values: Mapping[str, str]) -> None:
        # A dict first, as the label set of a measurement is: a name listed twice counts once.
        attributes = {name: values.get(name, "") for name in self._labels}
        self._series.record(self._instrument, value, tuple(attributes.items()))


class ListenerMetrics:
    """The gha_* instruments this listener's config asks for, rendered as Prometheus text."""

    def __init__(
        self,
        config: MetricsConfig | None,
        *,
        scale_set_labels: Mapping[str, str],
    ) -> None:
        config = config or DEFAULT_METRICS
        self.metrics = Series()
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
                instrument = self._instrument(section, name, spec, description=known[name])
                self._instruments[name] = _Selected(self.metrics, instrument, spec.labels)
        self._stages = _Selected(
            self.metrics,
            _Histogram(STAGE_HISTOGRAM, TIMELINE_METRICS[STAGE_HISTOGRAM], DEFAULT_BUCKETS),
            STAGE_LABELS,
        )
        self._capacity_waits = _Selected(
            self.metrics,
            _Counter(CAPACITY_WAITS, TIMELINE_METRICS[CAPACITY_WAITS]),
            CAPACITY_WAIT_LABELS,
        )

    @staticmethod
    def _instrument(
        section: str, name: str, spec: MetricSpec, *, description: str
    ) -> _Instrument[Any]:
        """A new instrument of the section's kind."""
        if section == "gauges":
            return _Gauge(name, description)
        if section == "counters":
            return _Counter(name, description)
        return _Histogram(name, description, spec.buckets or DEFAULT_BUCKETS)

    def _emit(self, name: str, value: float, *, labels: Mapping[str, str]) -> None:
        instrument = self._instruments.get(name)
        if instrument is not None:
            instrument(value, labels)

    def record_static(self, *, min_runners: int, max_runners: int) -> None:
        self._emit("gha_min_runners", min_runners, labels=self._scale_set_labels)
        self._emit("gha_max_runners", max_runners, labels=self._scale_set_labels)

    def record_statistics(self, stats: Statistics) -> None:
        for name, value in (
            ("gha_available_jobs", stats.total_available_jobs),
            ("gha_acquired_jobs", stats.total_acquired_jobs),
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
        startup = _unix_seconds_between(job.scale_set_assign_time, job.runner_assign_time)
        if startup is not None:
            self._emit("gha_job_startup_duration_seconds", startup, labels=labels)

    def record_job_completed(self, job: JobCompleted) -> None:
        # A job that never reached a runner (canceled while queued) is not a completion.
        if job.runner_assign_time is None:
            return
        labels = self._job_labels(job, job.result)
        self._emit("gha_completed_jobs_total", 1, labels=labels)
        execution = _unix_seconds_between(job.runner_assign_time, job.finish_time)
        if execution is not None:
            self._emit("gha_job_execution_duration_seconds", execution, labels=labels)

    def record_stages(self, timeline: Timeline) -> None:
        """One job's stage durations (docs/job-timeline.md)."""
        for stage in timeline.stages():
            self._stages(stage.seconds, {**self._scale_set_labels, "stage": stage.name})
        if timeline.capacity.endswith("maxRunners"):
            self._capacity_waits(1, self._scale_set_labels)

    def render(self) -> bytes:
        return generate_latest(self.metrics.registry)

    def shutdown(self) -> None:
        """Nothing to flush: the series live in this process until it exits."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


def _unix_seconds_between(start: datetime | None, end: datetime | None) -> int | None:
    """`end.Unix() - start.Unix()`, as ARC computes job durations: the difference of the whole
    Unix seconds, not the truncated difference (00.9 to 02.1 is 2 s, not 1 s)."""
    if start is None or end is None:
        return None
    return _unix_seconds(end) - _unix_seconds(start)


def _unix_seconds(moment: datetime) -> int:
    """Go's `Time.Unix()`: whole seconds since the epoch, rounded down; a time without a zone
    is UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _SECOND
