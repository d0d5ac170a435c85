"""The AutoscalingRunnerSet reconciler's metric: scale sets it had to leave registered on GitHub
when their set was deleted, with the labels ARC puts on its controller metrics
(docs/metrics.md#controller)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from controller.runners.metrics import scale_set_labels
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

LEFT_BEHIND = "gha_controller_scale_sets_left_behind_total"


class ScaleSetMetrics:
    def __init__(self, meter: Meter) -> None:
        self._left_behind = meter.create_counter(
            LEFT_BEHIND,
            description="Deleted AutoscalingRunnerSets whose scale set stays registered on GitHub "
            "(no usable GitHub credentials to delete it)",
        )

    def left_behind(self, ars: JSONDict) -> None:
        meta = metadata_of(ars)
        self._left_behind.add(
            1,
            scale_set_labels(
                name=str(meta["name"]),
                namespace=str(meta.get("namespace", "")),
                config_url=str((ars.get("spec") or {}).get("githubConfigUrl", "")),
            ),
        )
