"""Informer cost against the Kubernetes emulator: initial sync, event throughput, re-list on 410.

Creates N EphemeralRunners (through the emulator's write path), then measures with a real
kubernetes-asyncio client over loopback HTTP: the time for an informer to list and report
synced; the time from the first of M status patches until the cache holds the last; and the time
to re-list after a forced 410. Requests are counted by the emulator.

    .venv/bin/python bench/runtime_informer.py --runners 2000 --patches 500
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import warnings
from collections.abc import Callable

from kubernetes_asyncio import client

from controller.runtime import Informer, WatchSettings
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects

NS = "bench"


def runner(i: int) -> dict[str, object]:
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


async def wait_until(check: Callable[[], bool]) -> None:
    # A 5 ms poll bounds the measurement error; the informer exposes no event for these.
    while not check():  # noqa: ASYNC110
        await asyncio.sleep(0.005)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runners", type=int, default=2000)
    parser.add_argument("--patches", type=int, default=500)
    args = parser.parse_args()
    async with KubeEmulator(kubelet=False, watch_history=args.patches * 2) as kube:
        kube.apply_crds(project_crds())
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for i in range(args.runners):
            kube.apply(runner(i))
        async with client.ApiClient(await kube.configuration()) as api:
            objects = Objects(api)
            informer = Informer(objects=objects, kind=EPHEMERAL_RUNNER, settings=WatchSettings())
            kube.requests.reset()
            started = time.perf_counter()
            task = asyncio.create_task(informer.run())
            await informer.synced.wait()
            sync = time.perf_counter() - started

            started = time.perf_counter()
            last = ""
            for i in range(args.patches):
                done = await objects.patch(
                    EPHEMERAL_RUNNER,
                    NS,
                    f"runner-{i % args.runners}",
                    {"status": {"phase": "Pending", "runnerId": i}},
                    status=True,
                )
                last = done["metadata"]["resourceVersion"]
            name = f"runner-{(args.patches - 1) % args.runners}"

            def caught_up() -> bool:
                obj = informer.store.get(NS, name)
                return obj is not None and obj["metadata"]["resourceVersion"] == last

            await wait_until(caught_up)
            events = time.perf_counter() - started

            lists = informer.lists
            started = time.perf_counter()
            kube.faults.force_gone()

            def relisted() -> bool:
                return informer.lists > lists

            await wait_until(relisted)
            relist = time.perf_counter() - started
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            requests = kube.requests.summary()
    print(f"{args.runners} EphemeralRunners, {args.patches} status patches")
    print(f"- initial list to synced: {sync * 1000:.0f} ms")
    print(
        f"- {args.patches} patches until the cache holds the last: {events * 1000:.0f} ms "
        f"({args.patches / events:.0f} patches/s, patch requests included)"
    )
    print(f"- re-list after a forced 410: {relist * 1000:.0f} ms")
    informer_requests = {k: v for k, v in requests.items() if not k.startswith("patch")}
    print(f"- informer requests: {informer_requests}")


if __name__ == "__main__":
    warnings.simplefilter("default")
    asyncio.run(main())
