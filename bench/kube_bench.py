"""Throughput of the Kubernetes API emulator through the real kubernetes-asyncio client.

Starts `python -m sandbox.kube` in its own process (so client and server do not share one event
loop; `--in-process` runs it in this loop instead), then measures requests per second for
create, get, list and merge patch with `--concurrency` requests in flight, and watch fan-out:
`--watchers` open watches on one namespace while `--events` patches are written, timed until
every watcher has received every event.

    .venv/bin/python bench/kube_bench.py --requests 2000 --concurrency 8 --watchers 50 --events 200
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, watch

from sandbox.kube import KubeEmulator
from shared.kube.client import load_configuration

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "tests" / "sandbox" / "kube" / "fixtures" / "widgets-crd.yaml"
GROUP, VERSION, PLURAL, NS = "test.example.com", "v1", "widgets", "default"
MERGE = "application/merge-patch+json"
TIMEOUT = 60


@contextlib.asynccontextmanager
async def server(in_process: bool) -> AsyncIterator[client.Configuration]:
    if in_process:
        async with KubeEmulator() as kube:
            kube.apply_crds([CRD])
            yield await kube.configuration()
        return
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sandbox.kube",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
            "--crds",
            str(CRD),
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        await proc.stdout.readline()
        try:
            yield await load_configuration(str(kubeconfig))
        finally:
            proc.terminate()
            await proc.wait()


def widget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }


async def rate(count: int, concurrency: int, call: Callable[[int], Awaitable[Any]]) -> float:
    """Requests per second for `count` calls with `concurrency` in flight."""
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await call(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return count / (time.perf_counter() - start)


async def fan_out(co: client.CustomObjectsApi, watchers: int, events: int) -> tuple[float, float]:
    """(events delivered per second across all watchers, seconds until the last delivery)."""
    listed = await co.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, limit=1)
    rv = listed["metadata"]["resourceVersion"]
    received = [0] * watchers

    async def watcher(i: int) -> None:
        w = watch.Watch()
        async with w.stream(
            co.list_namespaced_custom_object,
            GROUP,
            VERSION,
            NS,
            PLURAL,
            resource_version=rv,
            timeout_seconds=TIMEOUT,
            _request_timeout=TIMEOUT + 5,
        ) as stream:
            async for _ in stream:
                received[i] += 1
                if received[i] >= events:
                    return

    # Watchers resume from the list's revision, so none misses a write made before it connects.
    tasks = [asyncio.create_task(watcher(i)) for i in range(watchers)]
    start = time.perf_counter()
    for i in range(events):
        await co.patch_namespaced_custom_object(
            GROUP, VERSION, NS, PLURAL, "w0", {"spec": {"size": i + 2}}, _content_type=MERGE
        )
    await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
    elapsed = time.perf_counter() - start
    return watchers * events / elapsed, elapsed


async def run(args: argparse.Namespace) -> None:
    async with server(args.in_process) as cfg, client.ApiClient(cfg) as api:
        co = client.CustomObjectsApi(api)
        n, c = args.requests, args.concurrency
        results = {
            "create": await rate(
                n,
                c,
                lambda i: co.create_namespaced_custom_object(
                    GROUP, VERSION, NS, PLURAL, widget(f"w{i}"), _request_timeout=TIMEOUT
                ),
            ),
            "get": await rate(
                n,
                c,
                lambda i: co.get_namespaced_custom_object(
                    GROUP, VERSION, NS, PLURAL, f"w{i}", _request_timeout=TIMEOUT
                ),
            ),
            f"list (limit {args.list_size})": await rate(
                max(n // 10, 1),
                c,
                lambda i: co.list_namespaced_custom_object(
                    GROUP, VERSION, NS, PLURAL, limit=args.list_size, _request_timeout=TIMEOUT
                ),
            ),
            "merge patch": await rate(
                n,
                c,
                lambda i: co.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    NS,
                    PLURAL,
                    f"w{i}",
                    {"metadata": {"labels": {"n": str(i)}}},
                    _content_type=MERGE,
                    _request_timeout=TIMEOUT,
                ),
            ),
        }
        mode = "in-process" if args.in_process else "separate process"
        print(f"server: {mode}; {n} requests, {c} in flight")
        print("| operation | requests/s |")
        print("|---|---|")
        for name, value in results.items():
            print(f"| {name} | {value:.0f} |")
        delivered, elapsed = await fan_out(co, args.watchers, args.events)
        print(
            f"watch fan-out: {args.watchers} watchers x {args.events} events in "
            f"{elapsed:.2f} s = {delivered:.0f} events delivered/s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per operation")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--list-size", type=int, default=100, help="items per list page")
    parser.add_argument("--watchers", type=int, default=50, help="open watches for fan-out")
    parser.add_argument("--events", type=int, default=200, help="writes watched by each")
    parser.add_argument("--in-process", action="store_true", help="serve in this event loop")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
