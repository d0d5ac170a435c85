"""The runtime's metrics, named as controller-runtime names them where it has an equivalent.

- controller_runtime_reconcile_total{controller,result}: reconciles by result (success,
  requeue_after, error, terminal_error)
- controller_runtime_reconcile_errors_total{controller}: reconciles that raised
- controller_runtime_reconcile_time_seconds{controller}: reconcile duration histogram
- controller_runtime_active_workers{controller}: workers inside a reconcile now
- workqueue_depth{name}: keys ready and waiting for a worker
- workqueue_queue_duration_seconds{name}: how long a key waited between its add and a worker
- rest_client_requests_total{code,host,method}: Kubernetes requests by answer ("<error>" when
  none came: timeout, refused connection)
- workqueue_adds_total{name}: keys added (an add coalesced into a waiting one is not counted)
- workqueue_retries_total{name}: rate-limited requeues after an error
- gha_runtime_predicate_dropped_total{watch}: updates dropped by a predicate (an owned watch's
  projection, or a primary watch's rule)
- gha_runtime_wakes_total{controller,watch,event,fields}: adds that woke a reconciler (not
  coalesced into a waiting key), by cause: the watch (its predicate's name, the controller's
  name for its primary kind), the event (add, update, delete) and, for an update, the fields it
  changed two levels deep (`status.phase`); docs/controller-runtime.md#wakes
- gha_runtime_echoes_dropped_total{controller,watch}: add and update events that only showed
  a controller its own pass's write (docs/controller-runtime.md#own-writes)
- gha_runtime_requeues_total{name}: scheduled adds (requeue_after, error backoff) that fell due
  and woke the reconciler
- gha_runtime_copies_total{controller}: lazy copies taken (reconciles that mutated an object)
- leader_election_master_status{name}: 1 while this process holds the lease
- gha_runtime_informer_lists_total{kind}: completed lists (the first, then one per 410)
- gha_runtime_informer_failures_total{kind}: failed lists and watches, timeouts included
- gha_runtime_informer_objects{kind}: objects in the cache

No series carries OpenTelemetry's otel_scope_* labels: the names and labels are the ones ARC's
controller exports through controller-runtime, so its dashboards query them unchanged
(docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

from controller.runtime.cache import Informer
from controller.runtime.queue import WorkQueue
from shared.telemetry.metrics import Metrics

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# client-go's workqueue buckets: powers of ten from 10 ns to 10 s.
QUEUE_BUCKETS = tuple(10.0**exponent for exponent in range(-8, 2))

Gauge = Callable[[], Iterable[tuple[float, dict[str, str]]]]


class RuntimeMetrics:
    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics or Metrics(
            "gha-controller",
            histogram_buckets={
                "controller_runtime_reconcile_time_seconds": RECONCILE_BUCKETS,
                "workqueue_queue_duration_seconds": QUEUE_BUCKETS,
            },
            scope_labels=False,
        )
        meter = self.metrics.meter
        self.reconciles = meter.create_counter("controller_runtime_reconcile_total")
        self.errors = meter.create_counter("controller_runtime_reconcile_errors_total")
        self.duration = meter.create_histogram(
            "controller_runtime_reconcile_time_seconds", unit="s"
        )
        self.active = meter.create_up_down_counter("controller_runtime_active_workers")
        self.dropped = meter.create_counter("gha_runtime_predicate_dropped_total")
        self.wakes = meter.create_counter("gha_runtime_wakes_total")
        self.echoes = meter.create_counter("gha_runtime_echoes_dropped_total")
        self.copies = meter.create_counter("gha_runtime_copies_total")
        self.queue_duration = meter.create_histogram("workqueue_queue_duration_seconds", unit="s")
        self.rest_requests = meter.create_counter("rest_client_requests_total")
        self._depth: list[Gauge] = []
        self._adds: list[Gauge] = []
        self._retries: list[Gauge] = []
        self._requeues: list[Gauge] = []
        self._leader: list[Gauge] = []
        self._lists: list[Gauge] = []
        self._failures: list[Gauge] = []
        self._objects: list[Gauge] = []
        meter.create_observable_counter(
            "gha_runtime_informer_lists_total", callbacks=[self._observe(self._lists)]
        )
        meter.create_observable_counter(
            "gha_runtime_informer_failures_total", callbacks=[self._observe(self._failures)]
        )
        meter.create_observable_gauge(
            "gha_runtime_informer_objects", callbacks=[self._observe(self._objects)]
        )
        meter.create_observable_gauge("workqueue_depth", callbacks=[self._observe(self._depth)])
        meter.create_observable_counter(
            "workqueue_adds_total", callbacks=[self._observe(self._adds)]
        )
        meter.create_observable_counter(
            "workqueue_retries_total", callbacks=[self._observe(self._retries)]
        )
        meter.create_observable_counter(
            "gha_runtime_requeues_total", callbacks=[self._observe(self._requeues)]
        )
        meter.create_observable_gauge(
            "leader_election_master_status", callbacks=[self._observe(self._leader)]
        )

    @staticmethod
    def _observe(
        gauges: list[Gauge],
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, attrs) for gauge in gauges for value, attrs in gauge()]

        return callback

    def observe_controller(self, name: str) -> None:
        """Start a controller's series at zero, as controller-runtime does, so a dashboard's
        rate() of errors reads 0 rather than "no data" before the first error."""
        labels = {"controller": name}
        self.errors.add(0, labels)
        self.active.add(0, labels)
        for result in ("success", "requeue_after", "error", "terminal_error"):
            self.reconciles.add(0, {**labels, "result": result})

    def observe_queue(self, queue: WorkQueue[Any]) -> None:
        labels = {"name": queue.name}
        self._depth.append(lambda: [(len(queue), labels)])
        self._adds.append(lambda: [(queue.adds, labels)])
        self._retries.append(lambda: [(queue.retries, labels)])
        self._requeues.append(lambda: [(queue.requeues, labels)])
        queue.observe_wait = lambda seconds: self.queue_duration.record(seconds, labels)

    def rest_client(self, host: str) -> Callable[[str, str], None]:
        """The observer an object client calls with each request's method and answer code."""

        def observe(method: str, code: str) -> None:
            self.rest_requests.add(1, {"code": code, "host": host, "method": method})

        return observe

    def observe_informer(self, informer: Informer) -> None:
        labels = {"kind": informer.kind.kind}
        self._lists.append(lambda: [(informer.lists, labels)])
        self._failures.append(lambda: [(informer.failures, labels)])
        self._objects.append(lambda: [(len(informer.store), labels)])

    def leader_gauge(self, gauge: Gauge) -> None:
        self._leader.append(gauge)

    def render(self) -> bytes:
        return self.metrics.render()
