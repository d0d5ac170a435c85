"""What the two runner reconcilers agree on to keep a drain off busy runners
(docs/reconcilers.md#busy-pods): the label the EphemeralRunner reconciler puts on a busy runner's
pod and the PodDisruptionBudget of each EphemeralRunnerSet selects."""

from __future__ import annotations

from typing import Final

from shared.api.names import EPHEMERAL_RUNNER_LABEL_VALUE, LABEL_EPHEMERAL_RUNNER

LABEL_RUNNER_BUSY: Final = "actions.github.com/runner-busy"
"""On a busy runner's pod, valued with the uid of the runner's EphemeralRunnerSet: each set's
budget selects its own busy pods and no pod is selected by two budgets (the eviction API refuses
such a pod with a 500, which `kubectl drain` takes for an error instead of waiting)."""

BUDGET_MIN_AVAILABLE: Final = 2**31 - 1
"""The budget's integer `minAvailable`: more pods than any set has, so its `disruptionsAllowed`
stays 0 and every pod it selects is refused eviction (429) while it carries the label."""


def busy_selector(set_uid: str) -> dict[str, str]:
    """The labels of the busy runner pods of the set with this uid."""
    return {LABEL_EPHEMERAL_RUNNER: EPHEMERAL_RUNNER_LABEL_VALUE, LABEL_RUNNER_BUSY: set_uid}
