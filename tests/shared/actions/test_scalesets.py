"""Find-or-register a scale set (`shared/actions/scalesets.py`), the one rule the controller
and the listener follow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from sandbox.actions import ActionsEmulator
from shared.actions import ActionsClient
from shared.actions.scalesets import find_or_register

T = TypeVar("T")


async def test_registers_once_then_finds(actions: ActionsEmulator, client: ActionsClient) -> None:
    made, created = await find_or_register(
        client, name="arc", runner_group="", labels=["gpu", "arc", "gpu"]
    )
    assert created
    assert (made.name, made.runner_group_id) == ("arc", 1)
    assert [(label.type, label.name) for label in made.labels] == [
        ("System", "arc"),
        ("System", "gpu"),
    ]
    assert made.runner_setting.disable_update

    found, created = await find_or_register(client, name="arc", runner_group="", labels=["x"])
    assert not created
    assert found.id == made.id
    assert actions.state.count("create_scale_set") == 1


async def test_looks_the_group_up_by_name(actions: ActionsEmulator, client: ActionsClient) -> None:
    group = actions.add_runner_group("gpu-group")
    made, _ = await find_or_register(client, name="arc", runner_group="gpu-group")
    assert (made.runner_group_id, made.runner_group_name) == (group, "gpu-group")
    assert actions.state.count("get_runner_group") == 1


async def test_every_request_goes_through_the_attempt(client: ActionsClient) -> None:
    made: list[str] = []

    async def attempt(operation: Callable[[], Awaitable[T]], what: str, /) -> T:
        made.append(what)
        return await operation()

    await find_or_register(client, name="arc", runner_group="Default", attempt=attempt)
    assert made == [
        "runner group lookup",
        "runner scale set lookup",
        "runner scale set registration",
    ]
