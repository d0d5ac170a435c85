"""The scale benchmark's emulators, each in its own process (`bench/controller_scale.py` starts
them): `python -m bench.emulators actions ...` and `python -m bench.emulators kube ...`.

In one process with the listener, the emulators took the CPU the listener needed above 5,000
runners (its watches failed and re-listed, runners were deleted twice): the figures measured the
harness. Here each emulator has its own interpreter; the kubelet runs its runner containers as
the Actions emulator's simulated runners over one WebSocket (`sandbox.actions.remote`).

Each process prints one JSON line once it serves (its URLs, credentials for the bench), then
serves until SIGTERM. Beside the emulator, a small HTTP endpoint (`admin`) answers the bench with
what it counts: requests aggregated as they arrive (each request is looked at once, however often
the bench asks), and the state its phases wait for, kept from the store's events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from controller.runners.busy import LABEL_RUNNER_BUSY
from sandbox.actions.emulator import ActionsEmulator
from sandbox.actions.remote import RemoteRuntime
from sandbox.demo.cluster import runner_set, setup_cluster
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.store import Event as StoreEvent
from sandbox.kube.store import Store
from shared.api.timeline import EVENT_REASON
from shared.api.views import is_busy
from shared.typedefs import JSONDict

ERS_KEY = ("actions.github.com", "ephemeralrunnersets")
ER_KEY = ("actions.github.com", "ephemeralrunners")
POD_KEY = ("", "pods")
EVENT_KEY = ("", "events")
SCALER_USER = "bench-scaler"
# A held job's duration: it runs until the bench releases it.
HELD = 86400.0


def subsystem(headers: dict[str, str]) -> str:
    """Who sent an Actions request, by its User-Agent's subsystem."""
    try:
        agent = json.loads(headers.get("User-Agent", ""))
    except ValueError:
        return "other"
    name = agent.get("subsystem") if isinstance(agent, dict) else None
    return {"gha-scale-set-controller": "controller", "ghalistener": "listener"}.get(
        str(name), "other"
    )


def unrelated_pod(namespace: str, index: int) -> JSONDict:
    """A pod of another application, as a Deployment makes it: labels, an owner, plain env
    values, probes and resources; bound to another node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-7d4b9c8f6d-{index:05d}",
            "namespace": namespace,
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
        },
        "spec": {
            "nodeName": "another-node",
            "containers": [
                {
                    "name": "web",
                    "image": "registry.example.com/shop/web:2.14.3",
                    "ports": [{"containerPort": 8080, "name": "http"}],
                    "env": [
                        {"name": f"SETTING_{k}", "value": f"value-{k}-{index}"} for k in range(12)
                    ],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "256Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                }
            ],
        },
    }


class Tracker:
    """One namespace's runners and pods, followed through the store's events: O(1) per event
    instead of a scan of every runner and pod per poll.

    Also issue 43's "nothing skipped under lag" counts, since the start: `busy`, the runners
    ever seen busy (a job and not done: the listener's write); `protected`, the runner pods ever
    seen with the busy label (the controller's busy-pod patch:
    docs/reconcilers.md#busy-pods); `busy_running`, the runners seen busy while their pod was
    still `Running` (the listener's write came before the job's end, so a protection could still
    matter), and `protected_running`, those of them whose pod got the label while it still ran
    (a label on a pod already done protects nothing); `explained`, the
    runners with a `JobTimeline` Event (docs/job-timeline.md). And how long the controller took:
    `protect_ms_p50` and `protect_ms_max`, from a runner seen busy while its pod ran to the
    label on its pod; `missed_window_ms_max`, the longest such runner left unprotected was busy
    before its pod ended (the time the controller had). Times are taken as `follow` applies
    each event, on the emulator's loop, as a watch would deliver it."""

    def __init__(self, store: Store, namespace: str) -> None:
        self._namespace = namespace
        self._subscription = store.subscribe({ER_KEY, POD_KEY, EVENT_KEY})
        self._runners: dict[str, bool] = {}
        """Name: Pending with `ready: true`."""
        self._pods: dict[str, bool] = {}
        """Name: Running."""
        self._ready: set[str] = set()
        """Runners Pending and ready whose pod runs."""
        self._busy: set[str] = set()
        self._protected: set[str] = set()
        self._busy_running: set[str] = set()
        self._busy_since: dict[str, float] = {}
        """Runners busy while their pod runs, unprotected yet: since when."""
        self._protected_running: set[str] = set()
        self._protect_ms: list[float] = []
        self._protect_sorted: list[float] = []
        self._missed_window_ms: list[float] = []
        self._explained: set[str] = set()
        for key in (ER_KEY, POD_KEY, EVENT_KEY):
            for obj in store.items(key, namespace):
                self._apply(key, obj, deleted=False)

    async def follow(self) -> None:
        """Apply the store's events as they come (until cancelled)."""
        queue = self._subscription.queue
        while True:
            event = await queue.get()
            if isinstance(event, StoreEvent):
                self._apply(event.key, event.obj, deleted=event.type == "DELETED")

    def state(self) -> dict[str, int]:
        # Polled all through a phase, in the process whose CPU the bench reports: sorted again
        # only when a sample came.
        if len(self._protect_sorted) != len(self._protect_ms):
            self._protect_sorted = sorted(self._protect_ms)
        protect = self._protect_sorted
        return {
            "runners": len(self._runners),
            "pods": len(self._pods),
            "ready": len(self._ready),
            "busy": len(self._busy),
            "protected": len(self._protected),
            "busy_running": len(self._busy_running),
            "protected_running": len(self._protected_running),
            "explained": len(self._explained),
            "protect_ms_p50": round(protect[len(protect) // 2]) if protect else 0,
            "protect_ms_max": round(protect[-1]) if protect else 0,
            "missed_window_ms_max": round(max(self._missed_window_ms, default=0)),
        }

    def _apply(self, key: tuple[str, str], obj: JSONDict, *, deleted: bool) -> None:
        meta = obj["metadata"]
        if meta.get("namespace") != self._namespace:
            return
        name = meta["name"]
        if key == EVENT_KEY:
            if obj.get("reason") == EVENT_REASON:
                self._explained.add(str((obj.get("involvedObject") or {}).get("uid")))
            return
        status = obj.get("status") or {}
        if key == ER_KEY:
            table = self._runners
            good = status.get("phase") == "Pending" and status.get("ready") is True
            if is_busy(obj):
                self._busy.add(name)
                if self._pods.get(name) and not deleted and name not in self._busy_running:
                    self._busy_running.add(name)
                    self._busy_since[name] = time.monotonic()
        else:
            table = self._pods
            good = status.get("phase") == "Running"
            since = self._busy_since.get(name)
            if (meta.get("labels") or {}).get(LABEL_RUNNER_BUSY):
                self._protected.add(name)
                if since is not None:
                    self._protect_ms.append((time.monotonic() - since) * 1000)
                    self._protected_running.add(name)
                    del self._busy_since[name]
            elif since is not None and (deleted or not good):
                self._missed_window_ms.append((time.monotonic() - since) * 1000)
                del self._busy_since[name]
        if deleted:
            table.pop(name, None)
        else:
            table[name] = good
        if self._runners.get(name) and self._pods.get(name):
            self._ready.add(name)
        else:
            self._ready.discard(name)


LAG_BUCKETS_MS = (10, 100, 1000, 5000)
"""Upper bounds of the event-loop lag histogram (`LoopLag`); beyond the last, `inf`."""


class LoopLag:
    """How late this process's event loop runs a timer: every `interval` seconds, the time past
    it counted into `LAG_BUCKETS_MS` buckets (`loop_lag_le_<ms>`, `loop_lag_le_inf`), which a
    phase's counts subtract like any other. Every request and watch event the process serves
    waits at least that long: the floor of any client's latency against it."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.buckets: Counter[str] = Counter()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(self.interval)
            late = (loop.time() - started - self.interval) * 1000
            bound = next((str(b) for b in LAG_BUCKETS_MS if late <= b), "inf")
            self.buckets[f"loop_lag_le_{bound}"] += 1


async def _serve_admin(
    routes: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]],
) -> tuple[web.AppRunner, str]:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_route("*", path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


async def _actions(args: argparse.Namespace) -> None:
    async with ActionsEmulator(require_acquire=False) as gh:
        pat = gh.add_pat()
        scale_sets = {
            name: gh.state.create_scale_set(
                name=name, runner_group_id=1, labels=[], runner_setting={}
            ).id
            for name in args.sets.split(",")
        }
        counts: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        seen = 0
        jobs: list[int] = []
        completed = 0

        async def state(_: web.Request) -> web.Response:
            nonlocal seen, completed
            log = gh.state.requests
            for record in log[seen:]:
                who = subsystem(record.headers)
                counts[f"{who} {record.endpoint}"] += 1
                if record.status >= 400:
                    errors[f"{who} {record.endpoint} {record.status}"] += 1
            seen = len(log)
            # Jobs complete about in order: resume from the first one not seen completed.
            while completed < len(jobs) and gh.state.jobs[jobs[completed]].state == "completed":
                completed += 1
            return web.json_response(
                {
                    "counts": counts,
                    "errors": errors,
                    "jobs": len(jobs),
                    "completed": completed,
                    "checks": gh.state.data.checks,
                }
            )

        async def enqueue(request: web.Request) -> web.Response:
            """Queue `count` jobs that run until released (`/release`)."""
            body = await request.json()
            for index in range(int(body["count"])):
                jobs.append(
                    gh.enqueue_job(
                        labels=[str(body["label"])], duration=HELD, display_name=f"job-{index}"
                    )
                )
            return web.json_response({"jobs": len(jobs)})

        def finish(job_id: int) -> None:
            if gh.state.jobs[job_id].state == "started":
                gh.complete_job(job_id)

        async def release(request: web.Request) -> web.Response:
            """The held jobs run `duration` seconds more: from now if started, else from their
            start."""
            seconds = float((await request.json())["duration"])
            loop = asyncio.get_running_loop()
            for job_id in jobs:
                job = gh.state.jobs[job_id]
                if job.state == "started":
                    loop.call_later(seconds, finish, job_id)
                elif job.state != "completed":
                    job.duration = seconds
            return web.json_response({})

        admin, admin_url = await _serve_admin(
            {"/state": state, "/jobs": enqueue, "/release": release}
        )
        try:
            print(
                json.dumps(
                    {
                        "url": gh.url,
                        "config_url": gh.config_url(),
                        "pat": pat,
                        "scale_sets": scale_sets,
                        "admin": admin_url,
                    }
                ),
                flush=True,
            )
            await _until_stopped()
        finally:
            await admin.cleanup()


async def _kube(args: argparse.Namespace) -> None:
    actions: dict[str, Any] = json.loads(args.actions)
    namespace: str = args.namespace
    workdir = Path(args.workdir)
    runtime = RemoteRuntime(actions["url"])
    await runtime.start()
    try:
        async with KubeEmulator(container_runtime=runtime) as kube:
            # kube-controller-manager's garbage collector deletes the runners' pods and JIT
            # Secrets on a real cluster, and its disruption controller writes the busy budgets'
            # status: count their requests too (docs/sandbox.md).
            kube.controllers.requests = kube.requests
            names = list(actions["scale_sets"])
            setup_cluster(
                kube,
                config_url=actions["config_url"],
                pat=actions["pat"],
                scale_set_id=actions["scale_sets"][names[0]],
                namespace=namespace,
                name=names[0],
            )
            for index in range(args.unrelated_pods):
                kube.apply(unrelated_pod(namespace, index))
            for name in names[1:]:
                kube.apply(
                    runner_set(
                        name=name,
                        namespace=namespace,
                        config_url=actions["config_url"],
                        scale_set_id=actions["scale_sets"][name],
                    )
                )
            kube.write_kubeconfig(workdir / "controller.kubeconfig")
            kube.write_kubeconfig(
                workdir / "listener.kubeconfig",
                token=kube.service_account_token(namespace, "gha-listener"),
            )
            kube.write_kubeconfig(
                workdir / "scaler.kubeconfig",
                token=kube.user_token(SCALER_USER, ["system:masters"]),
            )
            tracker = Tracker(kube.store, namespace)
            following = asyncio.create_task(tracker.follow())
            lag = LoopLag()
            lagging = asyncio.create_task(lag.run())
            counts: Counter[str] = Counter()
            errors: Counter[str] = Counter()
            seen = 0

            async def state(_: web.Request) -> web.Response:
                nonlocal seen
                log = kube.requests.log
                for r in log[seen:]:
                    if r.namespace not in (namespace, ""):
                        continue
                    resource = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
                    counts[f"{r.user}\t{r.verb}\t{resource}"] += 1
                    if r.code >= 400:
                        errors[f"{r.user}\t{r.verb}\t{resource}\t{r.code}"] += 1
                seen = len(log)
                replicas = {
                    name: ((kube.store.get(ERS_KEY, namespace, name) or {}).get("spec") or {}).get(
                        "replicas"
                    )
                    or 0
                    for name in names
                }
                return web.json_response(
                    {
                        "requests": seen,
                        "counts": counts,
                        "errors": errors,
                        "replicas": replicas,
                        **tracker.state(),
                        **lag.buckets,
                    }
                )

            admin, admin_url = await _serve_admin({"/state": state})
            try:
                print(json.dumps({"url": kube.url, "admin": admin_url}), flush=True)
                await _until_stopped()
            finally:
                following.cancel()
                lagging.cancel()
                await admin.cleanup()
    finally:
        await runtime.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    which = parser.add_subparsers(dest="which", required=True)
    actions = which.add_parser("actions", help="the Actions emulator")
    actions.add_argument("--sets", required=True, help="scale set names, comma-separated")
    kube = which.add_parser("kube", help="the Kubernetes emulator")
    kube.add_argument("--actions", required=True, help="the actions process's JSON line")
    kube.add_argument("--namespace", required=True)
    kube.add_argument("--workdir", required=True, help="where to write the kubeconfigs")
    kube.add_argument("--unrelated-pods", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(_actions(args) if args.which == "actions" else _kube(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
