"""The store's events carry the time of their commit (docs/sandbox-kube.md#request-accounting),
on the clock of the Actions emulator's records, so that one run's records of both line up."""

from __future__ import annotations

import time

from sandbox.kube import KubeEmulator
from sandbox.kube.store import Event


async def test_each_committed_write_carries_its_commit_time(kube: KubeEmulator) -> None:
    subscription = kube.store.subscribe({("", "configmaps")})
    times = []
    for name in ("a", "b"):
        before = time.time()
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
            }
        )
        times.append((before, time.time()))
    events = [subscription.queue.get_nowait() for _ in times]
    kube.store.unsubscribe(subscription)

    assert all(isinstance(e, Event) for e in events)
    assert [e.obj["metadata"]["name"] for e in events if isinstance(e, Event)] == ["a", "b"]
    for event, (before, after) in zip(events, times, strict=True):
        assert isinstance(event, Event)
        assert before <= event.committed_at <= after
