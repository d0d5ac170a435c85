"""Every Actions call about an AutoscalingRunnerSet's scale set: find or register it, follow a
new runner group or name, check it still exists, delete it (docs/autoscaling.md).

Each takes the set object (its namespace and spec name the GitHub configuration) and goes
through the client pool; credentials the service refused are read again on the next call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from controller.github.clients import ActionsClients
from shared.actions.client import ActionsClient
from shared.actions.errors import ActionsError, ScaleSetNotFound
from shared.actions.models import RunnerScaleSet
from shared.actions.scalesets import find_or_register, runner_group_id
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScaleSet:
    """What the set records of its scale set on GitHub."""

    id: int
    name: str
    runner_group_name: str

    @classmethod
    def of(cls, scale_set: RunnerScaleSet) -> ScaleSet:
        return cls(scale_set.id, scale_set.name, scale_set.runner_group_name)


class ScaleSets:
    """The AutoscalingRunnerSet reconciler's Actions calls, through the client pool."""

    def __init__(self, clients: ActionsClients) -> None:
        self._clients = clients

    async def _call(self, ars: JSONDict, call: Callable[[ActionsClient], Awaitable[T]]) -> T:
        namespace, spec = metadata_of(ars)["namespace"], ars.get("spec") or {}
        client = await self._clients.for_spec(namespace, spec)
        try:
            return await call(client)
        except ActionsError as exc:
            # A Secret replaced (say with its namespace re-created) within the pool's trust
            # period is read again on the next try.
            self._clients.rejected(namespace, spec, exc)
            raise

    async def check_config(self, ars: JSONDict) -> None:
        """Raises GitHubConfigError when the set's GitHub configuration cannot be used (its
        Secret is read again once the pool's trust period is over), on every pass: a Secret
        deleted or broken shows on the set even when no call is due."""
        await self._clients.for_spec(metadata_of(ars)["namespace"], ars.get("spec") or {})

    async def find_or_register(self, ars: JSONDict) -> ScaleSet:
        """The scale set named `spec.runnerScaleSetName` in `spec.runnerGroup`, registered
        with `spec.runnerScaleSetLabels` when there is none."""
        spec = ars.get("spec") or {}

        async def call(client: ActionsClient) -> RunnerScaleSet:
            found, _ = await find_or_register(
                client,
                name=str(spec["runnerScaleSetName"]),
                runner_group=str(spec.get("runnerGroup") or ""),
                labels=[str(label) for label in spec.get("runnerScaleSetLabels") or []],
            )
            return found

        return ScaleSet.of(await self._call(ars, call))

    async def move_to_group(self, ars: JSONDict, scale_set_id: int, group: str) -> ScaleSet:
        """Put the scale set into runner group `group` (the default group when empty)."""

        async def call(client: ActionsClient) -> RunnerScaleSet:
            group_id = await runner_group_id(client, group)
            return await client.update_runner_scale_set(
                scale_set_id, RunnerScaleSet(runner_group_id=group_id)
            )

        return ScaleSet.of(await self._call(ars, call))

    async def rename(self, ars: JSONDict, scale_set_id: int, name: str) -> ScaleSet:
        async def call(client: ActionsClient) -> RunnerScaleSet:
            return await client.update_runner_scale_set(scale_set_id, RunnerScaleSet(name=name))

        return ScaleSet.of(await self._call(ars, call))

    async def check(self, ars: JSONDict, scale_set_id: int) -> None:
        """Raises ScaleSetNotFound when the scale set is gone on GitHub."""

        async def call(client: ActionsClient) -> None:
            await client.get_runner_scale_set_by_id(scale_set_id)

        await self._call(ars, call)

    async def delete(self, ars: JSONDict, scale_set_id: int) -> None:
        """Delete the scale set; one already gone counts as deleted."""

        async def call(client: ActionsClient) -> None:
            with contextlib.suppress(ScaleSetNotFound):
                await client.delete_runner_scale_set(scale_set_id)

        await self._call(ars, call)
