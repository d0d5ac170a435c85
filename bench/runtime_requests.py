"""CPU per Kubernetes request: kubernetes-asyncio's stock ApiClient against `new_api_client`.

The stock client's aiohttp session trusts the environment, so every request looks up proxy
variables and ~/.netrc in the default thread pool. Both clients GET the same ConfigMap from the
emulator (in this process, so its CPU is in both figures alike), 8 requests at a time.

    .venv/bin/python bench/runtime_requests.py --requests 3000
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections.abc import Callable

from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from shared.kube.client import new_api_client
from shared.kube.objects import CONFIG_MAP, Objects

CONCURRENCY = 8


async def measure(
    kube: KubeEmulator, make: Callable[[client.Configuration], client.ApiClient], requests: int
) -> tuple[float, float]:
    async with make(await kube.configuration()) as api:
        objects = Objects(api)

        async def one_worker(count: int) -> None:
            for _ in range(count):
                await objects.get(CONFIG_MAP, "default", "probe")

        await one_worker(10)
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one_worker(requests // CONCURRENCY) for _ in range(CONCURRENCY)))
        return time.process_time() - cpu, time.perf_counter() - wall


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    async with KubeEmulator(kubelet=False) as kube:
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}})
        print(f"{args.requests} GETs, {CONCURRENCY} at a time, client and emulator in one process")
        print("| client | CPU us per request | wall us per request |")
        print("|---|---|---|")
        for name, make in (
            ("kubernetes-asyncio ApiClient", client.ApiClient),
            ("new_api_client", functools.partial(new_api_client, user_agent="bench/0")),
            ("kubernetes-asyncio ApiClient", client.ApiClient),
            ("new_api_client", functools.partial(new_api_client, user_agent="bench/0")),
        ):
            cpu, wall = await measure(kube, make, args.requests)
            print(
                f"| {name} | {cpu / args.requests * 1e6:.0f} | {wall / args.requests * 1e6:.0f} |"
            )


if __name__ == "__main__":
    asyncio.run(main())
