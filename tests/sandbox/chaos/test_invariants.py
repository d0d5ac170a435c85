"""The invariant the chaos runs added to the demo's observer: never more runners alive (neither
finished nor being deleted) than maxRunners, checked on each runner the store commits."""

from __future__ import annotations

import asyncio
from typing import Any

from sandbox.actions import ActionsEmulator
from sandbox.demo.cluster import ER_KEY, NAMESPACE, runner_set, setup_cluster
from sandbox.demo.observe import Observer
from sandbox.kube import KubeEmulator


def runner(name: str, config_url: str) -> dict[str, Any]:
    spec = runner_set(name="set", namespace=NAMESPACE, config_url=config_url, scale_set_id=1)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "namespace": NAMESPACE, "finalizers": ["test/hold"]},
        "spec": spec["spec"]["ephemeralRunnerSpec"],
    }


async def seen(observer: Observer, count: int) -> None:
    """Yield to the observer's task until it has tracked `count` runners (the store queued
    their events synchronously; the task needs turns of the loop to read them)."""
    for _ in range(1000):
        if len(observer.runners) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"the observer tracked {len(observer.runners)} runners, not {count}")


async def test_a_runner_beyond_max_is_a_violation_but_one_replacing_a_deleting_runner_is_not() -> (
    None
):
    async with ActionsEmulator() as gh, KubeEmulator() as kube:
        setup_cluster(kube, config_url=gh.config_url(), pat="pat", scale_set_id=1)
        observer = Observer(gh, kube, max_runners=1)
        watching = asyncio.create_task(observer.run())
        kube.apply(runner("a", gh.config_url()))
        rt = kube.catalog.preferred(*ER_KEY)
        assert rt is not None
        # Held by its finalizer: being deleted, so it no longer counts.
        kube.registry.delete(rt, ns=NAMESPACE, name="a")
        kube.apply(runner("b", gh.config_url()))
        await seen(observer, 2)
        assert observer.violations == []
        kube.apply(runner("c", gh.config_url()))
        await seen(observer, 3)
        watching.cancel()
    assert [(v["invariant"], v["object"]) for v in observer.violations] == [
        ("runners-above-max", "ephemeralrunner/c")
    ]
    assert (
        "2 runners neither finished nor deleting > maxRunners 1" in observer.violations[0]["detail"]
    )


async def test_dropped_watches_and_a_forced_410_leave_the_observer_checking() -> None:
    """The chaos faults that cut watches act on the API server's watch requests only: the
    observer's own subscription to the store must survive them, or every later violation
    would go unseen."""
    async with ActionsEmulator() as gh, KubeEmulator() as kube:
        setup_cluster(kube, config_url=gh.config_url(), pat="pat", scale_set_id=1)
        observer = Observer(gh, kube, max_runners=1)
        watching = asyncio.create_task(observer.run())
        kube.apply(runner("a", gh.config_url()))
        await seen(observer, 1)
        kube.faults.drop_watches()
        kube.faults.force_gone()
        kube.apply(runner("b", gh.config_url()))
        await seen(observer, 2)
        assert not watching.done()
        watching.cancel()
    assert [v["invariant"] for v in observer.violations] == ["runners-above-max"]
