"""Reading ARC's objects: what a runner's raw JSON says (its id, its job, its failures...).

The one home for these questions, asked by the controller's reconcilers and by the listener, so
that "is this runner busy" has one answer everywhere.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from shared.api.names import (
    ENV_RUNNER_CONTAINER_HOOKS,
    RUNNER_CONTAINER,
    SECRET_RUNNER_ID,
)
from shared.api.phases import is_terminal_phase
from shared.kube.views import parse_time, secret_value, status_int, status_of
from shared.typedefs import JSONDict, RawEphemeralRunnerSetStatus, RawEphemeralRunnerStatus


def runner_status(runner: JSONDict) -> RawEphemeralRunnerStatus:
    """An EphemeralRunner's status ({} when it has none)."""
    return cast(RawEphemeralRunnerStatus, status_of(runner))


def runner_set_status(runner_set: JSONDict) -> RawEphemeralRunnerSetStatus:
    """An EphemeralRunnerSet's status ({} when it has none)."""
    return cast(RawEphemeralRunnerSetStatus, status_of(runner_set))


def runner_id(runner: JSONDict) -> int:
    """The id the Actions service gave the runner; 0 before registration."""
    return status_int(runner, "runnerId")


def has_job(runner: JSONDict) -> bool:
    """Whether the listener recorded a job on the runner (it is or was busy): a `jobId` or, as
    the service may leave the job id out of a JobStarted message, a `jobRequestId` alone. The one
    definition every reconciler uses (docs/reconcilers.md#busy-runners)."""
    status = runner_status(runner)
    return bool(status.get("jobId") or status.get("jobRequestId"))


def is_busy(runner: JSONDict) -> bool:
    """Whether the runner is running a job now: it has one and has not finished (a runner being
    deleted is still busy until its job ends). Never deleted, never scaled down, its pod kept
    from node autoscalers."""
    return has_job(runner) and not is_terminal(runner)


def is_terminal(runner: JSONDict) -> bool:
    """Succeeded, Failed or Outdated: the runner will not run a job again."""
    return is_terminal_phase(runner_status(runner).get("phase"))


def failure_count(runner: JSONDict) -> int:
    """Failed pods recorded on the runner."""
    return len(runner_status(runner).get("failures") or {})


def last_failure(runner: JSONDict) -> datetime | None:
    """When the runner's latest recorded pod failure happened."""
    failures = runner_status(runner).get("failures") or {}
    times = [parse_time(v) for v in failures.values() if isinstance(v, str)]
    return max(times) if times else None


def runner_container(runner: JSONDict) -> JSONDict | None:
    """The first container named `runner` of the runner's pod template."""
    containers = ((runner.get("spec") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") == RUNNER_CONTAINER:
            return dict(container)
    return None


def has_container_hooks(runner: JSONDict) -> bool:
    """The runner container sets ACTIONS_RUNNER_CONTAINER_HOOKS (kubernetes mode)."""
    container = runner_container(runner) or {}
    return any(e.get("name") == ENV_RUNNER_CONTAINER_HOOKS for e in container.get("env") or [])


def runner_work_folder(runner: JSONDict) -> str:
    return str((runner_container(runner) or {}).get("workingDir") or "")


def secret_runner_id(secret: JSONDict) -> int:
    """The runner id a JIT config Secret records; 0 when it records none."""
    value = secret_value(secret, SECRET_RUNNER_ID) or ""
    return int(value) if value.isdigit() else 0
