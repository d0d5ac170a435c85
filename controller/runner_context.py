"""What the EphemeralRunner and EphemeralRunnerSet controllers of one manager share: settings,
the Actions clients, the event recorder and the gauges."""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from controller.actions_clients import ActionsClients
from controller.events import EventRecorder
from controller.runner_metrics import RunnerSetMetrics
from controller.runner_settings import RunnerSettings
from controller.runtime import Manager


@dataclass(frozen=True, slots=True)
class RunnerContext:
    settings: RunnerSettings
    clients: ActionsClients
    events: EventRecorder
    metrics: RunnerSetMetrics


_CONTEXTS: WeakKeyDictionary[Manager, RunnerContext] = WeakKeyDictionary()


def context_for(manager: Manager, *, settings: RunnerSettings | None = None) -> RunnerContext:
    """The manager's context, created on first use (settings from the environment by default)."""
    context = _CONTEXTS.get(manager)
    if context is None:
        chosen = settings or RunnerSettings()
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
