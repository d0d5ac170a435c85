"""What a runner's passes note in its `Recall` (controller.runtime.passes): the one vocabulary
of the EphemeralRunner reconciler's steps. The steps the two runner reconcilers share are
`controller.github.runners.RunnerStep`."""

from __future__ import annotations

from enum import Enum


class Step(Enum):
    SECRET_DELETED = "secret deleted"
    POD_CREATED = "pod created"
    POD_DELETED = "pod deleted"
    """With the pod's uid."""
    BUSY_POD_ANNOTATIONS = "busy pod annotations"
    """With the pod's uid; the value is the metadata patch written (annotations, busy label)."""
    POD_NODE = "pod node"
    """With the pod's uid; the value is the node it runs on, from the answer to the busy-pod
    patch (the cache keeps no pod spec)."""
    POD_LOST = "pod lost"
    """The runner's pod as its delete event showed it last (`rules.PodLoss`)."""
    LEFT_BEHIND = "left registered"
    FINALIZERS_REMOVED = "finalizers removed"
    TIMELINE_RECORDED = "job timeline recorded"
    """The `JobTimeline` Event was posted (docs/job-timeline.md)."""
