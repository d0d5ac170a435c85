"""ARC's controller gauges (docs/reconcilers.md#metrics) and this project's replacement counter."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from controller.ephemeralrunnerset.rules import Children
from controller.runtime import Request
from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL
from shared.api.names import (
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    METRIC_CONTROLLER_FAILED_RUNNERS,
    METRIC_CONTROLLER_PENDING_RUNNERS,
    METRIC_CONTROLLER_RUNNING_RUNNERS,
)
from shared.typedefs import JSONDict


@dataclass(frozen=True, slots=True)
class _Gauges:
    labels: dict[str, str]
    pending: int
    running: int
    failed: int


class RunnerSetMetrics:
    """ARC's controller gauges, one series per EphemeralRunnerSet."""

    def __init__(self, meter: Meter) -> None:
        self._sets: dict[Request, _Gauges] = {}
        self.replaced_failed = meter.create_counter(
            "gha_controller_failed_ephemeral_runner_replacements_total",
            description="Failed runners deleted to give their slot to a new runner",
        )
        for name, field in (
            (METRIC_CONTROLLER_PENDING_RUNNERS, "pending"),
            (METRIC_CONTROLLER_RUNNING_RUNNERS, "running"),
            (METRIC_CONTROLLER_FAILED_RUNNERS, "failed"),
        ):
            meter.create_observable_gauge(name, callbacks=[self._callback(field)])

    def _callback(self, field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(getattr(g, field), g.labels) for g in self._sets.values()]

        return observe

    def publish(self, runner_set: JSONDict, children: Children) -> None:
        meta = runner_set["metadata"]
        labels = meta.get("labels") or {}
        url = str(
            (runner_set.get("spec") or {}).get("ephemeralRunnerSpec", {}).get("githubConfigUrl", "")
        )
        try:
            config = parse_config_url(url, env={})
        except InvalidConfigURL:
            return
        series = {
            "name": str(labels.get(LABEL_SCALE_SET_NAME, meta["name"])),
            "namespace": str(labels.get(LABEL_SCALE_SET_NAMESPACE, meta["namespace"])),
            "repository": config.repository,
            "organization": config.organization,
            "enterprise": config.enterprise,
        }
        self._sets[Request.of(runner_set)] = _Gauges(
            series, len(children.pending), len(children.running), len(children.failed)
        )

    def forget(self, request: Request) -> None:
        self._sets.pop(request, None)
