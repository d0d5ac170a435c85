"""Find a runner scale set by name in its runner group, or register it: the one rule both the
controller (an AutoscalingRunnerSet without a scale set id) and the listener (started without
`runnerScaleSetId`) follow (docs/autoscaling.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from shared.actions.client import ActionsClient
from shared.actions.models import Label, RunnerScaleSet, RunnerSetting

T = TypeVar("T")

DEFAULT_RUNNER_GROUP_ID = 1
"""The runner group `Default`, the group of a scale set that names none."""


class Attempt(Protocol):
    """How each request is made: once, or under the caller's retry rule; `what` names the
    request for the caller's log lines."""

    def __call__(self, operation: Callable[[], Awaitable[T]], what: str, /) -> Awaitable[T]: ...


async def once(operation: Callable[[], Awaitable[T]], what: str, /) -> T:
    """Make the request once; its error is the caller's."""
    del what
    return await operation()


async def runner_group_id(client: ActionsClient, group: str, *, attempt: Attempt = once) -> int:
    """The id of the runner group called `group`; the default group's when it is empty."""
    if not group:
        return DEFAULT_RUNNER_GROUP_ID
    found = await attempt(lambda: client.get_runner_group_by_name(group), "runner group lookup")
    return found.id


async def find_or_register(
    client: ActionsClient,
    *,
    name: str,
    runner_group: str,
    labels: Sequence[str] = (),
    attempt: Attempt = once,
) -> tuple[RunnerScaleSet, bool]:
    """The scale set called `name` in `runner_group`, and whether it was registered now. A new
    one gets the labels `name` and then `labels` (each once, all of type `System`) and runner
    updates disabled, as ARC registers it."""
    group_id = await runner_group_id(client, runner_group, attempt=attempt)
    found = await attempt(
        lambda: client.get_runner_scale_set(runner_group_id=group_id, name=name),
        "runner scale set lookup",
    )
    if found is not None:
        return found, False
    names = [name]
    for label in labels:
        if label not in names:
            names.append(label)
    created = await attempt(
        lambda: client.create_runner_scale_set(
            RunnerScaleSet(
                name=name,
                runner_group_id=group_id,
                labels=[Label(name=label, type="System") for label in names],
                runner_setting=RunnerSetting(disable_update=True),
            )
        ),
        "runner scale set registration",
    )
    return created, True
