"""What the EphemeralRunner reconciler reads from its Pod: the projection of its owned watch,
with the one definition of readiness (`shared.kube.views.pod_ready`) that the projection and the
status code share."""

from __future__ import annotations

from controller.runtime.predicates import ProjectionPredicate
from shared.kube.objects import POD
from shared.kube.views import metadata_of, pod_ready, status_of
from shared.typedefs import JSONDict


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
