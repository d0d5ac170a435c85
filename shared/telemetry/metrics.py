"""OpenTelemetry metrics exposed in the Prometheus text format, one registry per process part.

Each `Metrics` owns its own prometheus_client registry, so several listeners or controllers in one
test process do not share series.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """A meter whose instruments are rendered by `render()` as Prometheus text."""

    def __init__(
        self,
        name: str,
        *,
        histogram_buckets: dict[str, Sequence[float]] | None = None,
        scope_labels: bool = True,
    ) -> None:
        """`scope_labels=False` drops the otel_scope_* labels, for series that must carry exactly
        the labels a dashboard written for another exporter expects (ARC's gha_* metrics)."""
        self.registry = CollectorRegistry()
        reader = PrometheusMetricReader(
            disable_target_info=True, registry=self.registry, scope_info_enabled=scope_labels
        )
        views = [
            View(
                instrument_name=instrument,
                aggregation=ExplicitBucketHistogramAggregation(list(buckets)),
            )
            for instrument, buckets in (histogram_buckets or {}).items()
        ]
        self.provider = MeterProvider(metric_readers=[reader], views=views)
        self.meter: Meter = self.provider.get_meter(name)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        self.provider.shutdown()
