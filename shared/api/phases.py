"""An EphemeralRunner's phase, without the models: the listener reads and writes phases and
leaves pydantic out of its import (docs/listener.md#memory)."""

from __future__ import annotations

from enum import StrEnum


class EphemeralRunnerPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OUTDATED = "Outdated"

    @property
    def is_terminal(self) -> bool:
        """The runner is done: nothing may move it to another phase (ARC's `IsDone`)."""
        return self in (
            EphemeralRunnerPhase.SUCCEEDED,
            EphemeralRunnerPhase.FAILED,
            EphemeralRunnerPhase.OUTDATED,
        )


def is_terminal_phase(phase: str | None) -> bool:
    """`is_terminal` for a raw `status.phase` value; unknown and missing phases are not."""
    if phase is None:
        return False
    try:
        return EphemeralRunnerPhase(phase).is_terminal
    except ValueError:
        return False
