"""The EphemeralRunner reconciler's metric: runners it had to leave registered on GitHub, with
the labels ARC puts on its controller metrics (docs/reconcilers.md#metrics)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL
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
    url = str((runner.get("spec") or {}).get("githubConfigUrl", ""))
    try:
        config = parse_config_url(url, env={})
        scope = (config.repository, config.organization, config.enterprise)
    except InvalidConfigURL:
        scope = ("", "", "")
    return {
        "name": str(labels.get(LABEL_SCALE_SET_NAME) or owner.get("name") or meta["name"]),
        "namespace": str(labels.get(LABEL_SCALE_SET_NAMESPACE) or meta["namespace"]),
        "repository": scope[0],
        "organization": scope[1],
        "enterprise": scope[2],
    }


class RunnerMetrics:
    def __init__(self, meter: Meter) -> None:
        self._left_behind = meter.create_counter(
            LEFT_BEHIND,
            description="Deleted runners whose registration on GitHub could not be removed "
            "(busy past the removal timeout, or no usable credentials)",
        )

    def left_behind(self, runner: JSONDict) -> None:
        self._left_behind.add(1, scale_set_labels(runner))
