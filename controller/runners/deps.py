"""The dependencies both runner reconcilers receive, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from controller.runners.actions import ActionsClients
from controller.runners.settings import RunnerSettings
from controller.runtime import EventRecorder, Expectations
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

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

    def unregistered(self, runner: JSONDict) -> bool:
        """Whether either reconciler already removed the runner from the Actions service."""
        uid = str(metadata_of(runner).get("uid"))
        return self.expectations.noted(uid, UNREGISTERED) is not None

    async def unregister(self, runner: JSONDict, runner_id: int) -> bool:
        """Remove the runner (registered as `runner_id`) from the Actions service, once for
        both reconcilers; False while the service says it runs a job."""
        if self.unregistered(runner):
            return True
        namespace = metadata_of(runner)["namespace"]
        removed = await self.clients.remove_runner(namespace, runner.get("spec") or {}, runner_id)
        if removed:
            self.expectations.note(str(metadata_of(runner).get("uid")), UNREGISTERED)
        return removed
