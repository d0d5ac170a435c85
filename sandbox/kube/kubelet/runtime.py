"""The kubelet's pluggable container runner and the exit codes it reports for it."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

SIGTERM_EXIT = 143
# What a container that the runtime could not run exits with (ContainerCannotRun).
RUNTIME_FAILURE_EXIT = 128


class ContainerRuntime(Protocol):
    """The kubelet's pluggable container runner."""

    async def run(
        self, *, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]
    ) -> int:
        """Run the container until it exits and return its exit code; cancelled when the pod is
        deleted. `env` is the container's environment resolved the way a kubelet does."""
        ...


class RunUntilDeleted:
    """The default runtime: every container runs until its pod is deleted."""

    async def run(
        self, *, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]
    ) -> int:
        await asyncio.Event().wait()
        return 0
