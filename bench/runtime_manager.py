"""A manager reconciling a burst of EphemeralRunners against the emulator, by worker count.

N runners appear at once (the emulator adds `--latency` to every PATCH, as a real API server's
round trip would); each first reconcile writes `status.phase: Pending` through a lazy
copy (one status merge patch); the write comes back as an update, whose reconcile changes
nothing and so copies and sends nothing. Measured per worker count: time until every runner is
Pending in the cache and the queue is idle, reconciles, copies and API requests.

    .venv/bin/python bench/runtime_manager.py --runners 300 --latency 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import time

from kubernetes_asyncio import client

from controller.runtime import (
    Controller,
    LazyObject,
    Manager,
    Request,
    Result,
    RuntimeSettings,
    Store,
)
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from shared.typedefs import JSONDict

NS = "bench"


def runner(i: int) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": f"runner-{i}", "namespace": NS},
        "spec": {
            "githubConfigUrl": "https://github.com/octo-org",
            "githubConfigSecret": "github-config",
            "runnerScaleSetId": 1,
        },
    }


class MarkPending:
    def __init__(self, cache: Store, objects: Objects) -> None:
        self.cache = cache
        self.objects = objects
        self.reconciles = 0

    async def reconcile(self, request: Request) -> Result:
        self.reconciles += 1
        obj = self.cache.get(request.namespace, request.name)
        if obj is None:
            return Result()
        handle = LazyObject(obj, kind=EPHEMERAL_RUNNER)
        if (obj.get("status") or {}).get("phase") != "Pending":
            handle.mutate().setdefault("status", {})["phase"] = "Pending"
        await handle.write(self.objects)
        return Result()


async def measure(runners: int, workers: int, latency: float) -> dict[str, float]:
    async with KubeEmulator(kubelet=False) as kube:
        kube.apply_crds(project_crds())
        if latency:
            kube.faults.latency(latency, verb="patch")
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        async with client.ApiClient(await kube.configuration()) as api:
            settings = RuntimeSettings(
                namespaces=frozenset({NS}), workers=workers, leader_election=None
            )
            manager = Manager(api=api, settings=settings)
            rec = MarkPending(manager.cache(EPHEMERAL_RUNNER), manager.objects)
            manager.add(Controller(name="bench", for_=EPHEMERAL_RUNNER, reconciler=rec))
            ctrl = manager.controllers[0]
            task = asyncio.create_task(manager.run())
            await manager.wait_synced()
            await manager.leading.wait()
            copies: list[int] = []
            kube.requests.reset()
            started = time.perf_counter()
            for i in range(runners):
                kube.apply(runner(i))
            store = manager.cache(EPHEMERAL_RUNNER)

            def done() -> bool:
                return (
                    len(store) == runners
                    and all((o.get("status") or {}).get("phase") == "Pending" for o in store)
                    and len(ctrl.queue) == 0
                    and not ctrl.queue.processing
                )

            while not done():  # noqa: ASYNC110 - a 10 ms poll bounds the measurement error
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - started
            text = manager.metrics.render().decode()
            copies = [
                int(float(line.rsplit(" ", 1)[1]))
                for line in text.splitlines()
                if line.startswith("gha_runtime_copies_total{")
            ]
            requests = sum(v for k, v in kube.requests.summary().items() if k.startswith("patch"))
            manager.stop()
            await task
            manager.metrics.metrics.shutdown()
    return {
        "seconds": elapsed,
        "reconciles": rec.reconciles,
        "copies": sum(copies),
        "patches": requests,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runners", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.02, help="added to every PATCH (s)")
    args = parser.parse_args()
    print(f"{args.runners} EphemeralRunners created at once, PATCH latency {args.latency} s")
    print("| workers | seconds until all Pending | reconciles | copies | patch requests |")
    print("|---|---|---|---|---|")
    for workers in (1, 4, 16):
        r = await measure(args.runners, workers, args.latency)
        print(
            f"| {workers} | {r['seconds']:.2f} | {r['reconciles']:.0f} | {r['copies']:.0f} | "
            f"{r['patches']:.0f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
