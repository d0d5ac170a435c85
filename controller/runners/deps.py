"""The dependencies both runner reconcilers receive, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from controller.runners.actions import ActionsClients
from controller.runners.settings import RunnerSettings
from controller.runtime import EventRecorder, Expectations

UNREGISTERED = "unregistered"
"""The expectations step, per runner uid, saying the runner was removed from the Actions
service: whichever reconciler removed it, the other does not ask again."""


@dataclass(frozen=True, slots=True)
class RunnerDeps:
    settings: RunnerSettings
    clients: ActionsClients
    events: EventRecorder
    expectations: Expectations
    """Shared by both reconcilers: a runner the set unregistered is not unregistered again by
    the runner's finalizer (ARC sends both requests)."""
