"""The four ARC kinds as request-path descriptions for `shared.kube.objects.Objects`, and the
kinds of the Helm-made objects ARC's cleanup annotations name."""

from __future__ import annotations

from typing import Final

from shared.api.names import (
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME,
    ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME,
    ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING,
    ANNOTATION_CLEANUP_MANAGER_ROLE_NAME,
    ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME,
    GROUP,
    VERSION,
)
from shared.kube.objects import ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT, Kind

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

CLEANUP_TARGETS: Final[tuple[tuple[str, Kind], ...]] = (
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_BINDING_NAME, ROLE_BINDING),
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_ROLE_NAME, ROLE),
    (ANNOTATION_CLEANUP_KUBERNETES_MODE_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNT),
    (ANNOTATION_CLEANUP_NO_PERMISSION_SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNT),
    (ANNOTATION_CLEANUP_GITHUB_SECRET_NAME, SECRET),
    (ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING, ROLE_BINDING),
    (ANNOTATION_CLEANUP_MANAGER_ROLE_NAME, ROLE),
)
"""Each of ARC's cleanup annotations with the kind of the Helm-made object it names, in the order
ARC strips their `cleanup-protection` finalizer (CLEANUP_ANNOTATIONS_IN_ORDER)."""
