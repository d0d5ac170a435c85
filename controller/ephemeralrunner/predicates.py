"""What the EphemeralRunner reconciler reads from its Pod: the projection of its owned watch,
and the one definition of readiness that the projection and the status code share."""

from __future__ import annotations

from controller.runtime.predicates import ProjectionPredicate
from shared.kube.objects import POD
from shared.kube.views import metadata_of, status_of
from shared.typedefs import JSONDict


def pod_ready(pod: JSONDict) -> bool:
    """The one definition of readiness: the pod's Ready condition is "True"."""
    conditions = status_of(pod).get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def pod_projection(pod: JSONDict) -> tuple[object, ...]:
    """uid, deletionTimestamp, phase, reason, message, container and init-container statuses,
    and readiness."""
    meta = metadata_of(pod)
    status = status_of(pod)
    return (
        meta.get("uid"),
        meta.get("deletionTimestamp"),
        status.get("phase"),
        status.get("reason"),
        status.get("message"),
        status.get("containerStatuses"),
        status.get("initContainerStatuses"),
        pod_ready(pod),
    )


POD_TO_ER = ProjectionPredicate("pod-to-ephemeralrunner", POD, pod_projection)
