"""The EphemeralRunner reconciler's metrics, with the labels ARC puts on its controller metrics
(docs/reconcilers.md#metrics): runners it had to leave registered on GitHub, and how long each
busy pod waited for its protection."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from controller.runners.metrics import scale_set_labels as labels_of
from shared.api.names import LABEL_SCALE_SET_NAME
from shared.kube.views import controller_owner, metadata_of
from shared.typedefs import JSONDict

LEFT_BEHIND = "gha_controller_runner_registrations_left_behind_total"
PROTECTION = "gha_controller_busy_pod_protection_seconds"
PROTECTION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def scale_set_labels(runner: JSONDict) -> dict[str, str]:
    """`name` (its scale set's, from the label the set gives its runners, else its owner's
    name), `namespace` (its own: a scale set's runners live in its namespace, and a label naming
    another, which whoever may edit the runner can write, would put samples into another
    namespace's series) and `repository`, `organization`, `enterprise` from its
    `githubConfigUrl` (empty when unparsable)."""
    meta = metadata_of(runner)
    labels = meta.get("labels") or {}
    owner = controller_owner(runner) or {}
    return labels_of(
        name=str(labels.get(LABEL_SCALE_SET_NAME) or owner.get("name") or meta["name"]),
        namespace=str(meta["namespace"]),
        config_url=str((runner.get("spec") or {}).get("githubConfigUrl", "")),
    )


class RunnerMetrics:
    def __init__(self, meter: Meter) -> None:
        self._left_behind = meter.create_counter(
            LEFT_BEHIND,
            description="Deleted runners whose registration on GitHub could not be removed "
            "(busy past the removal timeout, or no usable credentials)",
        )

        self._protection = meter.create_histogram(
            PROTECTION,
            unit="s",
            description="Seconds from the listener's JobStarted write to the busy pod's "
            "protection: how long a drain could have taken the job",
            explicit_bucket_boundaries_advisory=PROTECTION_BUCKETS,
        )

    def left_behind(self, runner: JSONDict) -> None:
        self._left_behind.add(1, scale_set_labels(runner))

    def protected(self, runner: JSONDict, seconds: float) -> None:
        self._protection.record(max(seconds, 0.0), scale_set_labels(runner))
