"""Fixtures for runtime tests against the Kubernetes emulator."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from prometheus_client.parser import text_string_to_metric_families

from shared.typedefs import JSONDict


def runner_body(name: str, *, labels: dict[str, str] | None = None) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "githubConfigUrl": "https://github.com/octo-org",
            "githubConfigSecret": "github-config",
            "runnerScaleSetId": 1,
        },
    }


def namespace_body(name: str) -> JSONDict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def sample_value(text: str, sample: str, /, **labels: str) -> float:
    """The value of a Prometheus sample whose labels include `labels`, or 0."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float = 10.0) -> None:
    """Poll `check` until it holds, failing after `within` seconds."""
    async with asyncio.timeout(within):
        # The server's state offers no event to wait on: poll it, with a deadline.
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
