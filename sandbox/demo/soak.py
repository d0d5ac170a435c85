"""`gha-sandbox demo --soak MINUTES`: a steady job rate for MINUTES of simulated time, with the
resources of both processes sampled as it goes and the slope of each fitted at the end.

Sampled every SAMPLE_EVERY simulated seconds: each process's resident memory (VmRSS from
/proc/PID/status), open file descriptors and, among them, sockets (its open connections and
listening ports), and the Kubernetes emulator's open watch requests. Neither process exposes its
asyncio task count, so the soak does not report one. The slopes leave out the first WARM_UP
share of the samples, while caches fill and connections open (docs/sandbox.md#soak).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
from pathlib import Path
from typing import Any

from sandbox.demo.cluster import CONTROLLER_LABEL, CONTROLLER_NAMESPACE, POD_KEY, System
from sandbox.demo.observe import Observer
from sandbox.demo.workload import JobSpec

JOBS_PER_MINUTE = 10.0
SAMPLE_EVERY = 30.0
WARM_UP = 0.2
PROCESSES = ("controller", "listener")


def steady(minutes: float, duration: float, per_minute: float = JOBS_PER_MINUTE) -> list[JobSpec]:
    """One job every 60 / `per_minute` simulated seconds for `minutes`, each running
    `duration` seconds."""
    gap = 60.0 / per_minute
    return [JobSpec(round(i * gap, 3), duration) for i in range(int(minutes * per_minute))]


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def descriptors(pid: int) -> tuple[int, int] | None:
    """(open fds, of which sockets) of a process."""
    base = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(base)
    except OSError:
        return None
    sockets = 0
    for name in names:
        with contextlib.suppress(OSError):
            if os.readlink(base / name).startswith("socket:"):
                sockets += 1
    return len(names), sockets


def slope(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of value over time; None for fewer than three points or no
    spread in time."""
    if len(points) < 3 or len({t for t, _ in points}) < 2:
        return None
    fit = statistics.linear_regression([t for t, _ in points], [v for _, v in points])
    return fit.slope


class Soak:
    def __init__(self, system: System, observer: Observer, *, minutes: float) -> None:
        self.system = system
        self.observer = observer
        self.minutes = minutes
        self.series: dict[str, list[tuple[float, float]]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def settled(self) -> bool:
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(SAMPLE_EVERY / self.observer.speedup)

    def _add(self, name: str, t: float, value: float) -> None:
        self.series.setdefault(name, []).append((t, value))

    def pids(self) -> dict[str, list[int]]:
        """The processes of each role: the demo's subprocesses (docker-run), or the processes
        the kubelet runs for the controller's and the listener's pods (in-cluster; each runs
        in its pod's directory). Two controller replicas add up."""
        found: dict[str, list[int]] = {name: [] for name in PROCESSES}
        for name, component in self.system.components.items():
            if component.proc.returncode is None and name in found:
                found[name].append(component.proc.pid)
        processes = self.system.kube.processes
        if self.system.components or processes is None:
            return found
        roles = {
            str(processes.pod_dir(pod)): "controller" if _is_controller(pod) else "listener"
            for pod in self.system.kube.store.items(POD_KEY, CONTROLLER_NAMESPACE)
        }
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    role = roles.get(os.readlink(entry / "cwd"))
                    if role is not None:
                        found[role].append(int(entry.name))
        return found

    def sample(self) -> None:
        """One point of every series, at the simulated time now (in minutes)."""
        t = self.observer.elapsed() / 60.0
        for name, pids in self.pids().items():
            rss = [r for r in (rss_kib(pid) for pid in pids) if r is not None]
            fds = [f for f in (descriptors(pid) for pid in pids) if f is not None]
            if rss:
                self._add(f"{name}.rss_kib", t, sum(rss))
            if fds:
                self._add(f"{name}.fds", t, sum(f[0] for f in fds))
                self._add(f"{name}.sockets", t, sum(f[1] for f in fds))
        self._add("kube.open_watches", t, len(self.system.kube.server.watches.open))

    def amend(self, report: dict[str, Any]) -> None:
        figures: dict[str, Any] = {}
        for name, points in sorted(self.series.items()):
            fitted = points[int(len(points) * WARM_UP) :]
            value = slope(fitted)
            figures[name] = {
                "first": points[0][1],
                "last": points[-1][1],
                "max": max(v for _, v in points),
                "slope_per_min": None if value is None else round(value, 3),
            }
        report["soak"] = {
            "minutes": self.minutes,
            "jobs_per_minute": JOBS_PER_MINUTE,
            "samples": len(self.series.get("kube.open_watches", [])),
            "sample_every_s": SAMPLE_EVERY,
            "warm_up_share": WARM_UP,
            "series": figures,
            "asyncio_tasks": "not exposed by the processes",
        }


def _is_controller(pod: dict[str, Any]) -> bool:
    key, value = CONTROLLER_LABEL
    return (pod["metadata"].get("labels") or {}).get(key) == value
