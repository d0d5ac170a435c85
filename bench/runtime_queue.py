"""Work-queue throughput by worker count, with a reconcile that waits on a simulated API call.

ARC runs one worker per kind (docs/controller-runtime.md#workers): throughput is then
1 / latency. This measures how many keys per second the runtime's queue and workers clear at 1, 2,
4, 8 and 16 workers when each reconcile awaits `--latency` seconds, and checks no key was ever
held by two workers.

    .venv/bin/python bench/runtime_queue.py --keys 300 --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import time

from opentelemetry.trace import NoOpTracer

from controller.runtime import Controller, Request, Result, RuntimeMetrics
from controller.runtime.controller import worker
from controller.runtime.queue import WorkQueue
from shared.api.kinds import EPHEMERAL_RUNNER


class SlowReconciler:
    def __init__(self, latency: float, total: int) -> None:
        self.latency = latency
        self.total = total
        self.done = 0
        self.in_flight: set[Request] = set()
        self.overlaps = 0
        self.finished = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        if request in self.in_flight:
            self.overlaps += 1
        self.in_flight.add(request)
        await asyncio.sleep(self.latency)
        self.in_flight.discard(request)
        self.done += 1
        if self.done >= self.total:
            self.finished.set()
        return Result()


async def measure(keys: int, workers: int, latency: float) -> tuple[float, int]:
    reconciler = SlowReconciler(latency, keys)
    ctrl = Controller(name="bench", for_=EPHEMERAL_RUNNER, reconciler=reconciler)
    ctrl.queue = WorkQueue[Request]("bench")
    metrics = RuntimeMetrics()
    started = time.perf_counter()
    for i in range(keys):
        for _ in range(3):
            ctrl.queue.add(Request("bench", f"runner-{i}"))
    tasks = [asyncio.create_task(worker(ctrl, metrics, NoOpTracer())) for _ in range(workers)]
    await reconciler.finished.wait()
    elapsed = time.perf_counter() - started
    ctrl.queue.shutdown()
    await asyncio.gather(*tasks)
    metrics.metrics.shutdown()
    return keys / elapsed, reconciler.overlaps


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    print(f"{args.keys} keys, each added 3 times, reconcile latency {args.latency * 1000:.0f} ms")
    print("| workers | keys/s | speed-up | overlapping keys |")
    print("|---|---|---|---|")
    base = None
    for workers in (1, 2, 4, 8, 16):
        rate, overlaps = await measure(args.keys, workers, args.latency)
        base = base or rate
        print(f"| {workers} | {rate:.1f} | {rate / base:.1f}x | {overlaps} |")


if __name__ == "__main__":
    asyncio.run(main())
