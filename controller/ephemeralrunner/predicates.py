"""What the EphemeralRunner reconciler reads from its Pod: the projection of its owned watch,
with the one definition of readiness (`shared.kube.views.pod_ready`) that the projection and the
status code share."""

from __future__ import annotations

from controller.ephemeralrunner.rules import LIVE_STATES, read_pod, stuck_reason
from controller.runtime.predicates import ProjectionPredicate
from shared.api.views import is_busy
from shared.kube.objects import POD
from shared.kube.views import metadata_of, pod_ready
from shared.typedefs import JSONDict


def pod_projection(pod: JSONDict) -> tuple[object, ...]:
    """uid, deletionTimestamp, readiness, and the pod as the reconciler reads it
    (`rules.read_pod`): a live runner container is one value whatever its containers' ids,
    start times or a passing `ContainerCreating`, since the reconciler writes nothing for them
    but a readiness change; a stuck or ended container by its state and reason (and message,
    once ended)."""
    meta = metadata_of(pod)
    reading = read_pod(pod)
    read: tuple[object, ...]
    if reading.state in LIVE_STATES and not stuck_reason(reading.reason):
        read = ("live",)
    elif reading.state in LIVE_STATES:
        read = (reading.state, reading.reason)
    else:
        read = (reading.state, reading.reason, reading.message)
    return (meta.get("uid"), meta.get("deletionTimestamp"), read, pod_ready(pod))


POD_TO_ER = ProjectionPredicate("pod-to-ephemeralrunner", POD, pod_projection)


def turned_busy(old: JSONDict, new: JSONDict) -> bool:
    """A runner update that gives it a job: handled before the backlog (the queue's urgent lane),
    so that its pod is protected while the job runs however far the controller lags
    (docs/reconcilers.md#busy-pods)."""
    return is_busy(new) and not is_busy(old)
