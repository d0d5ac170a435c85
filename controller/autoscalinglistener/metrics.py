"""`gha_controller_running_listeners`: ARC's gauge of the listeners whose container runs, one
series per listener, dropped when the listener goes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from controller.runtime import Request
from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

METRIC_RUNNING_LISTENERS = "gha_controller_running_listeners"


@dataclass(slots=True)
class RunningListeners:
    """The gauge's series by listener key, observed at each scrape."""

    series: dict[Request, tuple[int, dict[str, str]]] = field(default_factory=dict)

    @classmethod
    def registered(cls, meter: Meter) -> RunningListeners:
        gauge = cls()
        meter.create_observable_gauge(METRIC_RUNNING_LISTENERS, callbacks=[gauge.observe])
        return gauge

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, labels) for value, labels in self.series.values()]

    def publish(self, listener: JSONDict, running: bool) -> None:
        """The listener's series (ARC's labels: its name and namespace, and the GitHub
        configuration's repository, organization and enterprise)."""
        meta = metadata_of(listener)
        try:
            config = parse_config_url(
                str((listener.get("spec") or {}).get("githubConfigUrl")), env={}
            )
        except InvalidConfigURL:
            return
        labels = {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "repository": config.repository,
            "organization": config.organization,
            "enterprise": config.enterprise,
        }
        self.series[Request.of(listener)] = (1 if running else 0, labels)

    def drop(self, key: Request) -> None:
        self.series.pop(key, None)
