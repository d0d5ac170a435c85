"""`gha-sandbox demo --nodes N --drain-at SECONDS`: drain the node holding the most runners while
the workload runs, as `kubectl drain` does (sandbox.demo.nodes, over the emulator's HTTP API
with the admin's identity), and report the node, the drain's time, the evictions a disruption
budget refused (429) and the jobs lost with the runners it evicted (docs/sandbox.md#drain).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections import Counter
from typing import Any

from kubernetes_asyncio import client

from sandbox.demo.cluster import NAMESPACE, System
from sandbox.demo.nodes import RETRY, Drain, DrainError, drain
from sandbox.demo.observe import Observer
from sandbox.demo.report import failures

POD_KEY = ("", "pods")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drain-at",
        type=float,
        metavar="SECONDS",
        help="drain the node holding the most runners this many simulated seconds into the "
        "workload, as kubectl drain does (needs --nodes 2 or more; docs/sandbox.md#drain)",
    )


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.drain_at is not None and (args.drain_at < 0 or args.nodes < 2):
        parser.error("--drain-at needs SECONDS >= 0 and --nodes 2 or more")


def runner_pods(system: System) -> list[dict[str, Any]]:
    """The runner pods that are not going away."""
    return [
        pod
        for pod in system.kube.store.items(POD_KEY, NAMESPACE)
        if not pod["metadata"].get("deletionTimestamp")
        and (pod.get("spec") or {}).get("nodeName")
        and any(
            ref.get("kind") == "EphemeralRunner"
            for ref in pod["metadata"].get("ownerReferences") or []
        )
    ]


class NodeDrain:
    """The drain, started `at` simulated seconds after the workload's start."""

    def __init__(self, system: System, observer: Observer, *, at: float, speedup: float) -> None:
        self.system = system
        self.observer = observer
        self.at = at
        self.speedup = speedup
        self.node = ""
        self.result: Drain | None = None
        self.error = ""
        self.started_s: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def settled(self) -> bool:
        return self._task is not None and self._task.done()

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        await asyncio.sleep(self.at / self.speedup)
        pods = self.system.kube.store.subscribe({POD_KEY})
        try:
            while not runner_pods(self.system):
                await pods.queue.get()
        finally:
            self.system.kube.store.unsubscribe(pods)
        counts = Counter(pod["spec"]["nodeName"] for pod in runner_pods(self.system))
        self.node = counts.most_common(1)[0][0]
        self.started_s = round(self.observer.elapsed(), 2)
        try:
            async with client.ApiClient(await self.system.kube.configuration()) as api:
                self.result = await drain(
                    client.CoreV1Api(api), self.node, retry=RETRY / self.speedup
                )
        except DrainError as exc:
            self.error = str(exc)

    def amend(self, report: dict[str, Any]) -> None:
        """Add `drain`; a drain that did not finish fails the run."""
        result = self.result
        evicted = {key.split("/", 1)[1] for key in result.evicted} if result else set()
        # A runner runs one job and its name is its pod's: the jobs the evicted runners had.
        hit = [
            job
            for job in self.system.gh.state.jobs.values()
            if job.runner_name in evicted and job.runner_assign_time is not None
        ]
        lost = [job for job in hit if job.final_result == "canceled"]
        report["drain"] = {
            "node": self.node,
            "at_s": self.started_s,
            "time_s": round(result.seconds * self.speedup, 2) if result else None,
            "pods_evicted": len(result.evicted) if result else 0,
            "evictions_refused": result.refusals if result else 0,
            "jobs_on_evicted_runners": len(hit),
            "jobs_lost": len(lost),
            "completed": result is not None,
            "error": self.error or (None if result else "the drain did not finish"),
        }
        report["ok"] = failures(report) == []
