"""What every reconciler's `setup(manager, deps)` receives, built once by the composition root
(`controller.app.compose`): the settings, the Actions clients, the event recorder, the
expectations and the tracer."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from opentelemetry.trace import NoOpTracer, Tracer

from controller.runners.actions import ActionsClients, GitHubConfigError
from controller.runtime import EventRecorder, Expectations
from controller.settings import AutoscalingSettings, ListenerSettings, RunnerSettings
from shared.actions.errors import AuthenticationFailed
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

UNREGISTERED = "unregistered"
"""The expectations step, per runner uid, saying the runner was removed from the Actions
service: whichever reconciler removed it, the other does not ask again. Keyed by the runner
object's uid, so two runners that share a runner id on different GitHub configurations (two
GitHub hosts number their runners independently) never stand in for each other."""


class RunnerStep(enum.Enum):
    """Expectations steps one runner reconciler notes for the other."""

    CREATED_WITHOUT_SECRET = "created without a secret"


CREATED_WITHOUT_SECRET = RunnerStep.CREATED_WITHOUT_SECRET
"""The expectations step, per runner uid, saying this process created the runner and has not
created its JIT Secret yet: the runner reconciler then creates the Secret without reading it
first (no GET that can only answer 404). A process that lost the lease exits, so nothing else
can have created that Secret meanwhile."""


class Removal(enum.Enum):
    """What asking the Actions service to remove a runner came to."""

    REMOVED = "removed"
    """Removed now or before, or unknown to the service."""
    BUSY = "busy"
    """The service says the runner still runs a job."""
    NO_CREDENTIALS = "no credentials"
    """The runner's GitHub config Secret is gone or unusable, or GitHub refused it: nothing
    can remove the runner until someone fixes the Secret."""


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

    def unregistered(self, runner: JSONDict) -> bool:
        """Whether either reconciler already removed the runner from the Actions service."""
        uid = str(metadata_of(runner).get("uid"))
        return self.expectations.noted(uid, UNREGISTERED) is not None

    async def remove(self, runner: JSONDict, runner_id: int) -> Removal:
        """Remove the runner (registered as `runner_id`) from the Actions service, once for
        both reconcilers."""
        if self.unregistered(runner):
            return Removal.REMOVED
        meta = metadata_of(runner)
        try:
            removed = await self.clients.remove_runner(
                meta["namespace"], runner.get("spec") or {}, runner_id
            )
        except (GitHubConfigError, AuthenticationFailed) as exc:
            log.warning(
                "cannot unregister the runner without usable GitHub credentials",
                extra={"runner": meta["name"], "error": str(exc)},
            )
            return Removal.NO_CREDENTIALS
        if not removed:
            return Removal.BUSY
        self.expectations.note(str(meta.get("uid")), UNREGISTERED)
        return Removal.REMOVED

    async def unregister(self, runner: JSONDict, runner_id: int) -> bool:
        """The set's removal of an idle runner before deleting it: False while the service says
        it runs a job. A runner without usable credentials counts as removable: deleting it
        hands it to its own finalizer, which waits for the credentials a bounded time
        (`missing_credentials_removal_timeout_seconds`) instead of holding the set for ever."""
        return await self.remove(runner, runner_id) is not Removal.BUSY
