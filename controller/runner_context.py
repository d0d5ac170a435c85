"""What the EphemeralRunner and EphemeralRunnerSet controllers of one manager share: settings,
the Actions clients, the event recorder and the gauges."""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from pydantic import ValidationError

from controller.actions_clients import ActionsClients
from controller.events import EventRecorder
from controller.runner_metrics import RunnerSetMetrics
from controller.runner_settings import RunnerSettings
from controller.runtime import Manager
from controller.runtime.process import ENV_PREFIX, ConfigError


@dataclass(frozen=True, slots=True)
class RunnerContext:
    settings: RunnerSettings
    clients: ActionsClients
    events: EventRecorder
    metrics: RunnerSetMetrics


_CONTEXTS: WeakKeyDictionary[Manager, RunnerContext] = WeakKeyDictionary()


def settings_from_environment() -> RunnerSettings:
    """`RunnerSettings` from `GHA_CONTROLLER_*`; a bad value is a ConfigError naming the variable
    and what is wrong with it, in one line."""
    try:
        return RunnerSettings()
    except ValidationError as exc:
        first = exc.errors()[0]
        variable = ENV_PREFIX + "_".join(str(p) for p in first["loc"]).upper()
        raise ConfigError(f"{variable}: {first['msg']}") from None


def context_for(manager: Manager, *, settings: RunnerSettings | None = None) -> RunnerContext:
    """The manager's context, created on first use (settings from the environment by default)."""
    context = _CONTEXTS.get(manager)
    if context is None:
        chosen = settings or settings_from_environment()
        context = RunnerContext(
            settings=chosen,
            clients=ActionsClients(
                objects=manager.objects, credentials_ttl=chosen.credentials_ttl_seconds
            ),
            events=EventRecorder(objects=manager.objects),
            metrics=RunnerSetMetrics(manager.metrics.metrics.meter),
        )
        manager.on_shutdown(context.clients.aclose)
        _CONTEXTS[manager] = context
    return context
