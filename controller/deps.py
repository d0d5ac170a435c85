"""What every reconciler's `setup(manager, deps)` receives, built once by the composition root
(`controller.app.compose`): the settings, the Actions clients, the event recorder, the
expectations and the tracer."""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.trace import NoOpTracer, Tracer

from controller.github.clients import ActionsClients
from controller.github.runners import Runners
from controller.runtime import EventRecorder, Expectations
from controller.settings import AutoscalingSettings, ListenerSettings, RunnerSettings


@dataclass(frozen=True, slots=True)
class Deps:
    settings: RunnerSettings
    """The reconcilers' `GHA_CONTROLLER_*` settings."""
    clients: ActionsClients
    events: EventRecorder
    expectations: Expectations
    """Shared by every reconciler: a runner the set unregistered is not unregistered again by
    the runner's finalizer (ARC sends both requests)."""
    autoscaling: AutoscalingSettings | None = None
    """The AutoscalingRunnerSet reconciler's settings; None when the in-cluster mode is off."""
    listener: ListenerSettings | None = None
    """The AutoscalingListener reconciler's settings; None when the in-cluster mode is off."""
    tracer: Tracer = field(default_factory=NoOpTracer)
    """Spans of the jobs' timelines (docs/job-timeline.md#traces)."""

    @property
    def runners(self) -> Runners:
        """The runner reconcilers' Actions calls; a removal is noted in the runner's `Recall`."""
        return Runners(self.clients)
