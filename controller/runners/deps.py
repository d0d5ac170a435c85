"""The dependencies both runner reconcilers receive, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.trace import NoOpTracer, Tracer

from controller.github.clients import ActionsClients
from controller.github.runners import Runners
from controller.runners.settings import RunnerSettings
from controller.runtime import EventRecorder, Expectations

CREATED_WITHOUT_SECRET = "created without a secret"
"""The expectations step, per runner uid, saying this process created the runner and has not
created its JIT Secret yet: the runner reconciler then creates the Secret without reading it
first (no GET that can only answer 404). A process that lost the lease exits, so nothing else
can have created that Secret meanwhile."""


@dataclass(frozen=True, slots=True)
class RunnerDeps:
    settings: RunnerSettings
    clients: ActionsClients
    events: EventRecorder
    expectations: Expectations
    """Shared by both reconcilers: a runner the set unregistered is not unregistered again by
    the runner's finalizer (ARC sends both requests)."""
    tracer: Tracer = field(default_factory=NoOpTracer)
    """Spans of the jobs' timelines (docs/job-timeline.md#traces)."""

    @property
    def runners(self) -> Runners:
        """The runner reconcilers' Actions calls; a removal is noted in `expectations`."""
        return Runners(self.clients, self.expectations)
