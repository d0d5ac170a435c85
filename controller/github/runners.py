"""Every Actions call about one EphemeralRunner: its JIT config, a name clash, its removal.

A removal is made once for both runner reconcilers: the step `RunnerStep.UNREGISTERED` goes into
what the process remembers of the runner (the `Recall` the caller hands over: the runner's own
pass, or its set's `p.about(uid)`), and neither reconciler asks again (ARC sends both requests).
Credentials the service refused are read again on the next call.
"""

from __future__ import annotations

import contextlib
import enum
import logging

from controller.github.clients import ActionsClients, GitHubConfigError
from controller.runtime import Recall
from shared.actions.errors import ActionsError, AuthenticationFailed, RunnerNotFound
from shared.actions.models import JitRunnerConfig
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


class RunnerStep(enum.Enum):
    """The steps of a runner that one runner reconciler notes for the other, in the runner's
    `Recall` (by the runner object's uid)."""

    UNREGISTERED = "unregistered"
    """The runner was removed from the Actions service: whichever reconciler removed it, the
    other does not ask again. By uid, so two runners that share a runner id on different GitHub
    configurations (two GitHub hosts number their runners independently) never stand in for
    each other."""
    CREATED_WITHOUT_SECRET = "created without a secret"
    """This process created the runner and has not created its JIT Secret yet: the runner
    reconciler then creates the Secret without reading it first (no GET that can only answer
    404). A process that lost the lease exits, so nothing else can have created that Secret
    meanwhile."""


class Removal(enum.Enum):
    """What asking the Actions service to remove a runner came to."""

    REMOVED = "removed"
    """Removed now or before, or unknown to the service."""
    BUSY = "busy"
    """The service says the runner still runs a job."""
    NO_CREDENTIALS = "no credentials"
    """The runner's GitHub config Secret is gone or unusable, or GitHub refused it: nothing
    can remove the runner until someone fixes the Secret."""


class NameClash(enum.Enum):
    """What a runner whose name is registered already (its JIT config lost) came to."""

    FREED = "freed"
    """The registration belonged to this runner's scale set and is gone now, or was gone
    already: register again."""
    TAKEN = "taken"
    """A runner of another scale set has the name."""


class Runners:
    """The runner reconcilers' Actions calls, through the client pool."""

    def __init__(self, clients: ActionsClients) -> None:
        self._clients = clients

    @staticmethod
    def unregistered(memory: Recall) -> bool:
        """Whether either reconciler already removed the runner (`memory`: its `Recall`) from
        the Actions service."""
        return memory.done(RunnerStep.UNREGISTERED)

    async def remove(self, runner: JSONDict, runner_id: int, memory: Recall) -> Removal:
        """Remove the runner (registered as `runner_id`; `memory`: its `Recall`) from the
        Actions service, once for both reconcilers."""
        if self.unregistered(memory):
            return Removal.REMOVED
        meta = metadata_of(runner)
        try:
            removed = await self._clients.remove_runner(
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
        memory.note(RunnerStep.UNREGISTERED)
        return Removal.REMOVED

    async def unregister(self, runner: JSONDict, runner_id: int, memory: Recall) -> bool:
        """The set's removal of an idle runner before deleting it: False while the service says
        it runs a job. A runner without usable credentials counts as removable: deleting it
        hands it to its own finalizer, which waits for the credentials a bounded time
        (`missing_credentials_removal_timeout_seconds`) instead of holding the set for ever."""
        return await self.remove(runner, runner_id, memory) is not Removal.BUSY

    async def jit_config(
        self, runner: JSONDict, scale_set_id: int, *, work_folder: str
    ) -> JitRunnerConfig:
        """Register the runner under its name in the scale set and return its JIT config.
        Raises what the pool and the client raise (`RunnerExists` when the name is taken)."""
        meta = metadata_of(runner)
        spec = runner.get("spec") or {}
        client = await self._clients.for_spec(meta["namespace"], spec)
        try:
            return await client.generate_jit_runner_config(
                scale_set_id, name=meta["name"], work_folder=work_folder
            )
        except ActionsError as exc:
            self._clients.rejected(meta["namespace"], spec, exc)
            raise

    async def free_name(self, runner: JSONDict, scale_set_id: int) -> NameClash:
        """The runner's name is registered but its JIT config was lost: remove that
        registration when it belongs to `scale_set_id`. Not a removal of the runner itself,
        which registers again next: nothing is noted."""
        meta = metadata_of(runner)
        spec = runner.get("spec") or {}
        client = await self._clients.for_spec(meta["namespace"], spec)
        try:
            found = await client.get_runner_by_name(meta["name"])
            if found is None:
                return NameClash.FREED
            if found.runner_scale_set_id != scale_set_id:
                return NameClash.TAKEN
            with contextlib.suppress(RunnerNotFound):
                await client.remove_runner(found.id)
        except ActionsError as exc:
            self._clients.rejected(meta["namespace"], spec, exc)
            raise
        return NameClash.FREED
