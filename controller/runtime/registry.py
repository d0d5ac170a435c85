"""The controllers the `gha-controller` process runs.

A reconciler module registers a setup function, which receives the manager (for its cache,
client and settings) and adds its controller:

    @REGISTRY.register
    def setup(manager: Manager) -> None:
        manager.add(Controller(name="ephemeralrunner", for_=EPHEMERAL_RUNNER, ...))

The process imports the modules named in `controller.__main__.INSTALLED`, then calls every
registered setup function in registration order.
"""

from __future__ import annotations

from collections.abc import Callable

from controller.runtime.manager import Manager

Setup = Callable[[Manager], None]


class Registry:
    def __init__(self) -> None:
        self._setups: list[Setup] = []

    def register(self, setup: Setup) -> Setup:
        self._setups.append(setup)
        return setup

    def install(self, manager: Manager) -> None:
        for setup in self._setups:
            setup(manager)


REGISTRY = Registry()
