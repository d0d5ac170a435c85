"""The desired runner count and the patch id published with it.

The rules, and how the controller reads them: docs/listener.md, "Replicas and the patch id".

With a `scaling_policy` (docs/policies.md) the count comes from `shared.policy.decide`, which
is ARC's formula when no policy is set; "the minimum" is then the count the policy rests at.

The controller reads the patch id to decide how far it may act: a new id allows scaling up only,
the id it already served allows nothing, and 0 means "this is the settled state", which allows
scaling down to idle. So the listener publishes 0 only when nothing happened since the previous
publication and the count is back at the minimum. Both sides' rules: `shared.api.patchid`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from shared.api import patchid
from shared.policy import Decision, PolicyState, decide, utc_now
from shared.typedefs import JSONDict

if TYPE_CHECKING:
    # Its pydantic model is imported only for a config with a policy (docs/listener.md#memory).
    from shared.policy import ScalingPolicy


@dataclass(frozen=True, slots=True)
class Desired:
    replicas: int
    patch_id: int

    def ers_patch(self, *, scale_set_id: int | None = None) -> JSONDict:
        """The merge patch of the EphemeralRunnerSet carrying this state, and the scale set id
        for the runners' spec when one is given (docs/listener.md, "The scale set id")."""
        spec = patchid.spec_patch(replicas=self.replicas, patch_id=self.patch_id)
        if scale_set_id is not None:
            spec["ephemeralRunnerSpec"] = {"runnerScaleSetId": scale_set_id}
        return {"spec": spec}


class Scaler:
    """Turns `totalAssignedJobs` into the (replicas, patchID) to publish, ARC's way."""

    def __init__(
        self,
        *,
        min_runners: int,
        max_runners: int,
        policy: ScalingPolicy | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.min_runners = min_runners
        self.max_runners = max_runners
        self.policy = policy
        self._clock = clock
        self._policy_state = PolicyState()
        self._sequence = -1
        self._previous_target: int | None = None
        self._dirty = False

    def job_event(self) -> None:
        """A JobStarted or JobCompleted was handled since the last publication."""
        self._dirty = True

    def _decide(self, assigned_jobs: int) -> Decision:
        return decide(
            assigned_jobs=assigned_jobs,
            min_runners=self.min_runners,
            max_runners=self.max_runners,
            policy=self.policy,
            state=self._policy_state,
            now=self._clock(),
        )

    def replicas(self, assigned_jobs: int) -> int:
        """The count `desired` would publish now, without moving the sequence or the policy's
        state."""
        return self._decide(assigned_jobs).replicas

    def unpublished(self, assigned_jobs: int) -> None:
        """A batch for `assigned_jobs` was not published (its count stood): the policy's state
        moves on as if it had been (a scale-down delay starts when its lower count is first
        seen), the patch-id sequence does not."""
        self._policy_state = self._decide(assigned_jobs).state

    def desired(self, assigned_jobs: int) -> Desired:
        decision = self._decide(assigned_jobs)
        self._policy_state = decision.state
        target = decision.replicas
        self._sequence = patchid.next_sequence(self._sequence)
        settled = patchid.is_settled(
            job_event=self._dirty,
            target=target,
            previous_target=self._previous_target,
            resting=decision.resting,
        )
        self._previous_target = target
        self._dirty = False
        return Desired(replicas=target, patch_id=patchid.published(self._sequence, settled=settled))

    def publication_failed(self) -> None:
        """The last state did not reach the cluster: the next one must not claim to be settled,
        since the controller has not seen what happened in between."""
        self._dirty = True
