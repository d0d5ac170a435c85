"""The composition root turns on the in-cluster reconcilers only with ARC's two variables (the
controller's namespace and the listener image), as the Deployment sets them."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from controller.app import install_reconcilers
from controller.autoscalinglistener.reconciler import AutoscalingListenerReconciler
from controller.runtime import Manager, RuntimeSettings
from controller.settings import ConfigError

IN_CLUSTER = {
    "CONTROLLER_MANAGER_POD_NAMESPACE": "gha-system",
    "CONTROLLER_MANAGER_CONTAINER_IMAGE": "ghcr.io/gha-runner-scaler/gha-runner-scaler:1",
}


@pytest.mark.parametrize(
    ("env", "controllers"),
    [
        pytest.param(
            {}, ["ephemeralrunnerset", "ephemeralrunner", "runnernamespace"], id="docker-run-only"
        ),
        pytest.param(
            IN_CLUSTER,
            [
                "ephemeralrunnerset",
                "ephemeralrunner",
                "runnernamespace",
                "autoscalingrunnerset",
                "autoscalinglistener",
            ],
            id="in-cluster",
        ),
    ],
)
async def test_the_in_cluster_reconcilers_need_both_variables(
    kube_api: client.ApiClient,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    controllers: list[str],
) -> None:
    for name in IN_CLUSTER:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    manager = Manager(api=kube_api)
    install_reconcilers(manager)
    assert [c.name for c in manager.controllers] == controllers


async def test_watched_namespaces_must_include_the_controller_namespace(
    kube_api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in IN_CLUSTER.items():
        monkeypatch.setenv(name, value)
    manager = Manager(api=kube_api, settings=RuntimeSettings(namespaces=frozenset({"runners"})))
    with pytest.raises(ConfigError, match="gha-system"):
        install_reconcilers(manager)


async def test_listeners_get_the_entrypoint_and_the_controller_namespace(
    kube_api: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ARC's `LISTENER_ENTRYPOINT` is the listener container's command; listeners outside the
    controller's namespace are left alone (docs/autoscaling.md#autoscalinglistener)."""
    for name, value in IN_CLUSTER.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LISTENER_ENTRYPOINT", "/ghalistener")
    manager = Manager(api=kube_api)
    install_reconcilers(manager)
    [listeners] = [c for c in manager.controllers if c.name == "autoscalinglistener"]
    assert isinstance(listeners.reconciler, AutoscalingListenerReconciler)
    settings = listeners.reconciler.settings
    assert (settings.entrypoint, settings.controller_namespace) == ("/ghalistener", "gha-system")
