"""The four ARC kinds as request-path descriptions for `shared.kube.objects.Objects`."""

from __future__ import annotations

from shared.api.names import GROUP, VERSION
from shared.kube.objects import Kind

AUTOSCALING_RUNNER_SET = Kind(
    "AutoscalingRunnerSet", "autoscalingrunnersets", group=GROUP, version=VERSION
)
AUTOSCALING_LISTENER = Kind(
    "AutoscalingListener", "autoscalinglisteners", group=GROUP, version=VERSION
)
EPHEMERAL_RUNNER_SET = Kind(
    "EphemeralRunnerSet", "ephemeralrunnersets", group=GROUP, version=VERSION
)
EPHEMERAL_RUNNER = Kind("EphemeralRunner", "ephemeralrunners", group=GROUP, version=VERSION)
