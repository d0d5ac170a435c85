"""One contract for every reconciler package: `setup(manager, deps)`, called by the composition
root (controller/app.py `compose`), which is also how the test rig wires the controller."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
from kubernetes_asyncio import client

from controller import (
    app,
    autoscalinglistener,
    autoscalingrunnerset,
    ephemeralrunner,
    ephemeralrunnerset,
    runnernamespace,
)
from controller.deps import Deps
from controller.runtime import Manager
from controller.settings import RunnerSettings
from sandbox.actions.emulator import ActionsEmulator
from tests.controller.conftest import IN_CLUSTER, RigOptions, open_rig

SETUPS = {
    "ephemeralrunner": ephemeralrunner.setup,
    "ephemeralrunnerset": ephemeralrunnerset.setup,
    "autoscalingrunnerset": autoscalingrunnerset.setup,
    "autoscalinglistener": autoscalinglistener.setup,
    "runnernamespace": runnernamespace.setup,
}


@pytest.mark.parametrize("name", SETUPS)
def test_every_setup_takes_the_manager_and_the_deps(name: str) -> None:
    signature = inspect.signature(SETUPS[name], eval_str=True)
    assert [(p.name, p.kind, p.annotation) for p in signature.parameters.values()] == [
        ("manager", inspect.Parameter.POSITIONAL_OR_KEYWORD, Manager),
        ("deps", inspect.Parameter.POSITIONAL_OR_KEYWORD, Deps),
    ]


def test_the_composition_root_calls_every_setup() -> None:
    assert app.RUNNER_RECONCILERS | app.IN_CLUSTER_RECONCILERS == SETUPS


@pytest.mark.parametrize(
    "setup", [autoscalingrunnerset.setup, autoscalinglistener.setup], ids=IN_CLUSTER
)
async def test_the_in_cluster_reconcilers_need_their_settings(
    kube_api: client.ApiClient, setup: Callable[[Manager, Deps], object]
) -> None:
    manager = Manager(api=kube_api)
    deps = app.compose(manager, RunnerSettings())
    assert deps.autoscaling is None
    assert deps.listener is None
    with pytest.raises(ValueError, match="in-cluster settings"):
        setup(manager, deps)


async def test_the_rig_is_wired_by_the_composition_root(
    monkeypatch: pytest.MonkeyPatch, namespace: str, actions: ActionsEmulator
) -> None:
    composed: list[Deps] = []
    compose = app.compose

    def recorded(*args: object, **kwargs: object) -> Deps:
        deps = compose(*args, **kwargs)  # type: ignore[arg-type]
        composed.append(deps)
        return deps

    monkeypatch.setattr(app, "compose", recorded)
    options = RigOptions(controllers=tuple(SETUPS), kubelet=False)
    async with open_rig(options, namespace=namespace, actions=actions) as rig:
        assert len(composed) == 1
        assert composed[0] is rig.deps
        assert [c.name for c in rig.manager.controllers] == list(
            app.RUNNER_RECONCILERS | app.IN_CLUSTER_RECONCILERS
        )
