"""The EphemeralRunner reconciler's metric: runners it had to leave registered on GitHub, with
the labels ARC puts on its controller metrics (docs/reconcilers.md#metrics)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from controller.runners.metrics import scale_set_labels as labels_of
from shared.api.names import LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE
from shared.kube.views import controller_owner, metadata_of
from shared.typedefs import JSONDict

LEFT_BEHIND = "gha_controller_runner_registrations_left_behind_total"


def scale_set_labels(runner: JSONDict) -> dict[str, str]:
    """`name`, `namespace` (its scale set's, from the labels the set gives its runners, else
    its owner's name and its own namespace) and `repository`, `organization`, `enterprise` from
    its `githubConfigUrl` (empty when unparsable)."""
    meta = metadata_of(runner)
    labels = meta.get("labels") or {}
    owner = controller_owner(runner) or {}
    return labels_of(
        name=str(labels.get(LABEL_SCALE_SET_NAME) or owner.get("name") or meta["name"]),
        namespace=str(labels.get(LABEL_SCALE_SET_NAMESPACE) or meta["namespace"]),
        config_url=str((runner.get("spec") or {}).get("githubConfigUrl", "")),
    )


class RunnerMetrics:
    def __init__(self, meter: Meter) -> None:
        self._left_behind = meter.create_counter(
            LEFT_BEHIND,
            description="Deleted runners whose registration on GitHub could not be removed "
            "(busy past the removal timeout, or no usable credentials)",
        )

    def left_behind(self, runner: JSONDict) -> None:
        self._left_behind.add(1, scale_set_labels(runner))
