"""The controller at scale: one EphemeralRunnerSet scaled to N runners, what one runner costs.

Each part of the system runs in its own process, as in a cluster: the Actions emulator and the
Kubernetes emulator (`bench.emulators`; the kubelet runs the Actions emulator's simulated runners
as the runner containers, over one WebSocket), the real listener (`gha-listener`, with
`--jobs`), and the `gha-controller` reconcilers, either in this process's event loop (installed
by `controller.app.install_reconcilers` as the process does, production settings, 4 workers) or,
with `--controller-process`, as the real `gha-controller` process (its CPU time and memory are
reported), read through its /metrics endpoint. This process only drives the phases and reads
the counts from the emulators' admin endpoints; each process's CPU time comes from /proc.

1. Scale-up: the EphemeralRunnerSet is patched to N replicas (what the listener sends, by a user
   of its own) and timed until all N EphemeralRunners exist, their pods run, and each runner is
   `Pending` with `ready: true` (registered, idle); then until the controllers are idle.
2. With `--jobs`: N jobs are queued on the Actions emulator (direct assignment, as github.com
   does) and the listener is started; the idle runners take them, and the jobs run 5 s
   (`--job-seconds`) from when the listener has its session (until then they are held: a job
   done before its first statistics would leave it to scale the idle set to 0 and back up).
   Timed until every job has completed and the set is back to 0 replicas, no runner and no pod
   left, controllers idle.

Counted per runner: Kubernetes requests by user, verb and resource (informer lists and watches
are shown apart: they are per process, not per runner), kube-controller-manager's garbage
collector's included (`gc`: docs/sandbox.md#the-garbage-collectors-requests) and its disruption
controller's (`disruption`: the busy-pod budget's status, docs/sandbox-kube.md#poddisruptionbudgets;
left out of the totals against ARC, which makes no budget), Actions requests by sender (the
User-Agent's subsystem), reconciles, predicate drops and lazy copies per
controller; issue 43's "nothing skipped under lag" ratios per phase (runners with a `JobTimeline`
Event per job completed, busy runner pods labelled per busy runner: `bench.emulators.Tracker`);
and the same per-runner counts against ARC's figures
(docs/reconcilers.md#arcs-figures), with and without the garbage collector on both sides.

    .venv/bin/python -m bench.controller_scale --runners 100 --jobs [--controller-process]
    .venv/bin/python -m bench.controller_scale --runners 10 --sets 100 --controller-process

`--unrelated-pods M` puts M pods of another application in the namespace first (not on the
emulator's node, so they stay Pending): a shared cluster's pods the controller never touches.
`--controller-source DIR` runs the controller process from another source tree (`git archive
<commit> | tar -x -C DIR`), to compare two commits in one session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aiohttp
from kubernetes_asyncio import client, config
from prometheus_client.parser import text_string_to_metric_families

from bench.emulators import LAG_BUCKETS_MS
from controller.app import install_reconcilers
from controller.runtime import Manager, RuntimeSettings
from sandbox import leash
from sandbox.kube.disruption import DISRUPTION_USER
from sandbox.kube.gc import GC_USER
from shared.typedefs import JSONDict

NAMESPACE = "bench"
SCALE_SET = "scale-runners"
CONTROLLER_USER = "kubernetes-admin"
SCALER_USER = "bench-scaler"
LISTENER_USER = f"system:serviceaccount:{NAMESPACE}:gha-listener"
USERS = {
    CONTROLLER_USER: "controller",
    SCALER_USER: "scaler",
    LISTENER_USER: "listener",
    GC_USER: "gc",
    DISRUPTION_USER: "disruption",
}
ERS_KEY = ("actions.github.com", "ephemeralrunnersets")
ER_KEY = ("actions.github.com", "ephemeralrunners")
POD_KEY = ("", "pods")
CONTROLLERS = ("ephemeralrunner", "ephemeralrunnerset")
POLL = 0.05

# ARC's figures per runner lifecycle (one job, one new runner, minRunners 0), as (min, typical):
# docs/reconcilers.md#arcs-figures. Kubernetes requests of the EphemeralRunner and
# EphemeralRunnerSet reconcilers: ER writes 10, ER Secret GETs 7 / 13, ERS 4.
ARC_CONTROLLER_KUBE = (21, 27)
ARC_CONTROLLER_SECRET_GETS = (7, 13)
# The listener's Kubernetes requests: set patches and the JobStarted status patch.
ARC_LISTENER_KUBE = (3, 4)
# Actions requests: controller 2 (generatejitconfig and the agent DELETE), listener 4 / 6.
ARC_CONTROLLER_ACTIONS = (2, 2)
ARC_LISTENER_ACTIONS = (4, 6)
# kube-controller-manager's garbage collector: ARC deletes the runner's pod and JIT Secret
# itself (in its 10 writes above) before it lets the runner go, so the collector finds no
# dependent left to delete (docs/sandbox.md#the-garbage-collectors-requests).
ARC_GC_KUBE = (0, 0)
# Reconciles: (ARC as it is, ARC with this project's projection predicates).
ARC_RECONCILES = {"ephemeralrunner": (14, 13), "ephemeralrunnerset": (15, 14)}
# Scale-up only (to a registered, idle, ready runner), ER and ERS controllers without the
# AutoscalingRunnerSet: 17 requests typical, 12 when the five passes that write nothing are
# merged away; 1 Actions request (generatejitconfig).
ARC_SCALE_UP_CONTROLLER_KUBE = (12, 17)
ARC_SCALE_UP_CONTROLLER_ACTIONS = 1
# Requests that serve a process rather than a runner (ARC's figures do not charge the admin token
# refresh to a runner; the listener's session is made once): shown, never compared.
PER_PROCESS_ENDPOINTS = frozenset(
    {
        "access_token",
        "registration_token",
        "runner_registration",
        "create_session",
        "refresh_session",
        "delete_session",
        "get_scale_set",
        "get_scale_set_by_name",
        "get_runner_group",
    }
)


@dataclass
class Counts:
    """Everything counted over one phase (a difference of two snapshots)."""

    kube: Counter[str] = field(default_factory=Counter)
    """`who verb resource[/subresource]`, lists and watches included."""
    kube_errors: Counter[str] = field(default_factory=Counter)
    """`who verb resource code` for answers >= 400."""
    actions: Counter[str] = field(default_factory=Counter)
    """`who endpoint`."""
    actions_errors: Counter[str] = field(default_factory=Counter)
    """`who endpoint code` for answers >= 400."""
    metrics: Counter[str] = field(default_factory=Counter)
    """`metric label=value`."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds by process: this one (emulators, listener, and the controller when it runs
    here) and the controller's own process."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Issue 43's "nothing skipped under lag": `jobs` completed, runners `explained` (with a
    `JobTimeline` Event), `busy` runners and busy runner pods `protected` (the busy label), and
    the same two for the runners seen busy while their pod still ran (`busy_running`,
    `protected_running`), and the controller's time to protect (`protect_ms_p50`,
    `protect_ms_max`, `missed_window_ms_max`: bench.emulators.Tracker)."""

    def __sub__(self, before: Counts) -> Counts:
        return Counts(
            skipped=self.skipped - before.skipped,
            kube=self.kube - before.kube,
            kube_errors=self.kube_errors - before.kube_errors,
            actions=self.actions - before.actions,
            actions_errors=self.actions_errors - before.actions_errors,
            metrics=self.metrics - before.metrics,
            cpu={k: v - before.cpu.get(k, 0.0) for k, v in self.cpu.items()},
        )

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            skipped=self.skipped + other.skipped,
            kube=self.kube + other.kube,
            kube_errors=self.kube_errors + other.kube_errors,
            actions=self.actions + other.actions,
            actions_errors=self.actions_errors + other.actions_errors,
            metrics=self.metrics + other.metrics,
            cpu={k: v + other.cpu.get(k, 0.0) for k, v in self.cpu.items()},
        )

    def kube_total(self, who: str, *, informers: bool = False) -> int:
        """Requests of `who`; lists and watches only when `informers`."""
        return sum(
            n
            for key, n in self.kube.items()
            if key.startswith(who + " ") and (key.split()[1] in ("list", "watch")) == informers
        )

    def actions_total(self, who: str) -> int:
        """Requests of `who` for runners and jobs (the token chain and the session left out)."""
        return sum(
            n
            for key, n in self.actions.items()
            if key.startswith(who + " ") and key.split()[1] not in PER_PROCESS_ENDPOINTS
        )

    def metric(self, name: str, label: str) -> int:
        return self.metrics[f"{name} {label}"]


@dataclass
class Phase:
    name: str
    runners: int
    seconds_ready: float
    """Until the phase's condition held (all Pending-ready, or all jobs done and back to 0)."""
    seconds_settled: float
    """Until, in addition, the controllers were idle."""
    counts: Counts
    runners_created: int
    load: tuple[float, float, float]
    memory_kib: tuple[int, int] | None = None
    """The controller process's (VmRSS, VmHWM) at the phase's end, with `--controller-process`:
    the steady figure with its N runners (or none, after the jobs) and the peak so far."""


@dataclass
class Result:
    runners: int
    controller_process: bool
    phases: list[Phase]
    idle_memory_kib: tuple[int, int] | None = None
    """(VmRSS, VmHWM) of the controller process once it settled with no runner."""
    unrelated_pods: int = 0

    def lifecycle(self) -> Counts:
        total = Counts()
        for phase in self.phases:
            total = total + phase.counts
        return total


def _metric_counts(text: str) -> Counter[str]:
    """Counters and gauges of the runtime's Prometheus text, keyed `name label=value`."""
    wanted = {
        "controller_runtime_reconcile": "controller",
        "controller_runtime_reconcile_errors": "controller",
        "gha_runtime_predicate_dropped": "watch",
        "gha_runtime_copies": "controller",
        "workqueue_adds": "name",
        "workqueue_retries": "name",
        "gha_runtime_informer_lists": "kind",
        "gha_runtime_informer_failures": "kind",
    }
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name == "controller_runtime_reconcile_time_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    key = f"reconcile_milliseconds {sample.labels.get('controller', '')}"
                    counts[key] += round(sample.value * 1000)
            continue
        label = wanted.get(family.name)
        if label is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                counts[f"{family.name} {sample.labels.get(label, '')}"] += int(sample.value)
    return counts


def _gauge(text: str, name: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
    )


class ControllerHandle(Protocol):
    """The controller under measurement, in this process or in its own."""

    async def metrics(self) -> str:
        """Its Prometheus text."""
        ...

    def cpu_seconds(self) -> float | None:
        """CPU time it used so far; None when it shares this process."""
        ...

    def memory_kib(self) -> tuple[int, int] | None:
        """(VmRSS, VmHWM) of its process; None when it shares this process."""
        ...


class InProcess:
    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    async def metrics(self) -> str:
        return self.manager.metrics.render().decode()

    def cpu_seconds(self) -> float | None:
        return None

    def memory_kib(self) -> tuple[int, int] | None:
        return None


class Subprocess:
    def __init__(self, *, pid: int, metrics_url: str, http: aiohttp.ClientSession) -> None:
        self.pid = pid
        self.metrics_url = metrics_url
        self.http = http

    async def metrics(self) -> str:
        async with self.http.get(self.metrics_url, timeout=aiohttp.ClientTimeout(10)) as reply:
            reply.raise_for_status()
            return await reply.text()

    def cpu_seconds(self) -> float | None:
        return _cpu_seconds(self.pid)

    def memory_kib(self) -> tuple[int, int] | None:
        status = Path(f"/proc/{self.pid}/status").read_text()
        found = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M))
        return int(found["VmRSS"]), int(found["VmHWM"])


def log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


async def read_line(proc: asyncio.subprocess.Process, log: Path, what: str) -> JSONDict:
    """The one JSON line a `bench.emulators` process prints once it serves."""
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
    except TimeoutError:
        line = b""
    if not line:
        raise RuntimeError(f"{what} did not start: {log_tail(log)}")
    answer: JSONDict = json.loads(line)
    return answer


@dataclass
class Child:
    """A process of the system under measurement: its pid for /proc, its log."""

    name: str
    proc: asyncio.subprocess.Process
    log: Path

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self.proc.pid)

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 60)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return self.proc.returncode or 0


@contextlib.asynccontextmanager
async def spawned(
    name: str,
    args: list[str],
    workdir: Path,
    env: dict[str, str] | None = None,
    *,
    first_line: bool = False,
) -> AsyncIterator[Child]:
    """A leashed child process logging to `<name>.log`; with `first_line` its stdout is a pipe
    for the one line it prints once it serves (a child that logs to stdout must not have one:
    unread, the pipe fills, the child blocks on its next log line and never exits)."""
    log = workdir / f"{name}.log"
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *leash.command(*args),
            stdout=asyncio.subprocess.PIPE if first_line else err,
            stderr=err,
            env=None if env is None else {**os.environ, **env},
        )
    child = Child(name, proc, log)
    try:
        yield child
    finally:
        await child.stop()


def _cpu_seconds(pid: int) -> float:
    # /proc/<pid>/stat fields 14 and 15 (user and system time, in clock ticks); the command
    # name in parentheses may hold spaces, so count from its closing parenthesis.
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Bench:
    """The phases' view of the system: the emulators' admin endpoints, the controller's
    metrics, the processes' CPU time."""

    def __init__(
        self,
        *,
        http: aiohttp.ClientSession,
        kube_admin: str,
        actions_admin: str,
        controller: ControllerHandle,
        children: list[Child],
    ) -> None:
        self.http = http
        self.kube_admin = kube_admin
        self.actions_admin = actions_admin
        self.controller = controller
        self.children = children
        self.kube_state: JSONDict = {}
        self.actions_state: JSONDict = {}

    async def _get(self, url: str) -> JSONDict:
        async with self.http.get(url, timeout=aiohttp.ClientTimeout(60)) as reply:
            reply.raise_for_status()
            answer: JSONDict = await reply.json()
            return answer

    async def refresh(self) -> None:
        self.kube_state = await self._get(self.kube_admin + "/state")
        self.actions_state = await self._get(self.actions_admin + "/state")

    async def _post(self, path: str, body: JSONDict) -> None:
        async with self.http.post(
            self.actions_admin + path, json=body, timeout=aiohttp.ClientTimeout(120)
        ) as reply:
            reply.raise_for_status()

    async def enqueue_held_jobs(self, count: int, *, label: str) -> None:
        """Jobs that run (their runners busy) until `release_jobs`."""
        await self._post("/jobs", {"count": count, "label": label})

    async def release_jobs(self, duration: float) -> None:
        await self._post("/release", {"duration": duration})

    def listener_has_session(self, before: int) -> Callable[[], Awaitable[bool]]:
        async def created() -> bool:
            await self.refresh()
            made: bool = self.actions_state["counts"].get("listener create_session", 0) > before
            return made

        return created

    async def snapshot(self) -> Counts:
        await self.refresh()
        counts = Counts()
        for key, n in self.kube_state["counts"].items():
            user, verb, resource = key.split("\t")
            counts.kube[f"{USERS.get(user, 'other')} {verb} {resource}"] += n
        for key, n in self.kube_state["errors"].items():
            user, verb, resource, code = key.split("\t")
            counts.kube_errors[f"{USERS.get(user, 'other')} {verb} {resource} {code}"] += n
        counts.actions.update(self.actions_state["counts"])
        counts.skipped.update(
            {
                key: self.kube_state.get(key, 0)
                for key in (
                    "explained",
                    "busy",
                    "protected",
                    "busy_running",
                    "protected_running",
                    "protect_ms_p50",
                    "protect_ms_max",
                    "missed_window_ms_max",
                    *(f"loop_lag_le_{b}" for b in (*LAG_BUCKETS_MS, "inf")),
                )
            },
            jobs=self.actions_state["completed"],
        )
        counts.actions_errors.update(self.actions_state["errors"])
        counts.metrics = _metric_counts(await self.controller.metrics())
        # What the Actions emulator's mutations cost it, counted: flat per runner as N grows.
        counts.metrics["actions_emulator_waiter_checks all"] = self.actions_state["checks"]
        counts.cpu["bench process"] = time.process_time()
        for child in self.children:
            if child.proc.returncode is None:
                counts.cpu[f"{child.name} process"] = child.cpu_seconds()
        controller_cpu = self.controller.cpu_seconds()
        if controller_cpu is not None:
            counts.cpu["controller process"] = controller_cpu
        return counts

    async def all_pending_ready(self, n: int) -> bool:
        await self.refresh()
        ready: bool = self.kube_state["runners"] == n and self.kube_state["ready"] == n
        return ready

    async def jobs_done_and_empty(self) -> bool:
        await self.refresh()
        jobs = self.actions_state
        if jobs["completed"] < jobs["jobs"]:
            return False
        state = self.kube_state
        return not any(state["replicas"].values()) and state["runners"] == 0 and state["pods"] == 0

    async def idle(self) -> bool:
        text = await self.controller.metrics()
        return (
            _gauge(text, "workqueue_depth") == 0
            and _gauge(text, "controller_runtime_active_workers") == 0
        )

    async def until(
        self, condition: Callable[[], Awaitable[bool]], *, within: float, what: str
    ) -> float:
        """Seconds until `condition()` held; fails after `within` seconds."""
        started = time.monotonic()
        while not await condition():
            if time.monotonic() - started > within:
                raise TimeoutError(f"{what}: not reached within {within:.0f}s")
            for child in self.children:
                if child.proc.returncode is not None:
                    raise RuntimeError(f"the {child.name} process exited: {log_tail(child.log)}")
            await asyncio.sleep(POLL)
        return time.monotonic() - started

    async def settle(self, *, within: float) -> None:
        """Until the queues are empty, no reconcile runs and no request came for 0.5 s."""
        deadline = time.monotonic() + within
        seen = -1
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            await self.refresh()
            total = self.kube_state["requests"]
            if total != seen or not await self.idle():
                seen = total
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= 0.5:
                return
            await asyncio.sleep(POLL)
        raise TimeoutError("the controllers did not settle")


@contextlib.asynccontextmanager
async def _in_process(kubeconfig: Path) -> AsyncIterator[ControllerHandle]:
    """The reconcilers `gha-controller` installs, on a manager in this event loop."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        manager = Manager(
            api=api,
            settings=RuntimeSettings(namespaces=frozenset({NAMESPACE}), leader_election=None),
        )
        install_reconcilers(manager)
        task = asyncio.create_task(manager.run())
        try:
            await asyncio.wait_for(manager.wait_synced(), 30)
            yield InProcess(manager)
        finally:
            manager.stop()
            await asyncio.wait_for(task, 60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def controller_subprocess(
    kubeconfig: Path, workdir: Path, source: Path | None = None
) -> AsyncIterator[ControllerHandle]:
    """`gha-controller` in its own process (own interpreter, own core), as in a cluster; with
    `source`, the `controller` package of that tree (`python -m` imports from its directory)."""
    metrics_port, health_port = free_port(), free_port()
    args = [
        "-m",
        "controller",
        f"--kubeconfig={kubeconfig}",
        "--no-leader-elect",
        f"--watch-namespace={NAMESPACE}",
        "--bind-address=127.0.0.1",
        f"--metrics-port={metrics_port}",
        f"--health-port={health_port}",
        "--log-level=warning",
    ]
    log = workdir / "controller.log"
    async with aiohttp.ClientSession() as http:
        with log.open("wb") as out:
            # Leashed (dies with this process) unless it runs another tree, which may predate
            # `sandbox.leash`.
            argv = [sys.executable, *args] if source else leash.command(sys.executable, *args)
            proc = await asyncio.create_subprocess_exec(*argv, stdout=out, stderr=out, cwd=source)
        try:
            ready_url = f"http://127.0.0.1:{health_port}/readyz"
            deadline = time.monotonic() + 60
            while True:
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gha-controller did not start: {log_tail(log)}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(ready_url, timeout=aiohttp.ClientTimeout(5)) as reply:
                        if reply.status == 200:
                            break
                await asyncio.sleep(POLL)
            yield Subprocess(
                pid=proc.pid, metrics_url=f"http://127.0.0.1:{metrics_port}/metrics", http=http
            )
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def _load() -> tuple[float, float, float]:
    return os.getloadavg()


def listener_config(workdir: Path, actions: JSONDict, *, scale_set_id: int, runners: int) -> Path:
    """The listener's config file, as the controller writes it for the listener pod."""
    path = workdir / "listener-config.json"
    path.write_text(
        json.dumps(
            {
                "configure_url": actions["config_url"],
                "github_token": actions["pat"],
                "ephemeral_runner_set_namespace": NAMESPACE,
                "ephemeral_runner_set_name": SCALE_SET,
                "runner_scale_set_id": scale_set_id,
                "min_runners": 0,
                "max_runners": runners,
                "metrics_addr": "",
            }
        )
    )
    path.chmod(0o600)
    return path


@contextlib.asynccontextmanager
async def emulators(
    workdir: Path, names: list[str], *, unrelated_pods: int = 0
) -> AsyncIterator[tuple[JSONDict, JSONDict, Child, Child]]:
    """The Actions emulator and the Kubernetes emulator, each in its own process, with the
    scale sets `names`: (the Actions emulator's first line, the Kubernetes emulator's, their
    processes)."""
    command = [sys.executable, "-m", "bench.emulators"]
    async with spawned(
        "actions", [*command, "actions", f"--sets={','.join(names)}"], workdir, first_line=True
    ) as gh:
        actions = await read_line(gh.proc, gh.log, "the Actions emulator")
        kube_args = [
            *command,
            "kube",
            f"--actions={json.dumps(actions)}",
            f"--namespace={NAMESPACE}",
            f"--workdir={workdir}",
            f"--unrelated-pods={unrelated_pods}",
        ]
        async with spawned("kube", kube_args, workdir, first_line=True) as kube:
            kube_line = await read_line(kube.proc, kube.log, "the Kubernetes emulator")
            yield actions, kube_line, gh, kube


async def run(
    *,
    runners: int,
    jobs: bool,
    job_seconds: float = 5.0,
    controller_process: bool = False,
    logs: Path | None = None,
    within: float = 600.0,
    sets: int = 1,
    unrelated_pods: int = 0,
    controller_source: Path | None = None,
) -> Result:
    """Both phases against fresh emulators, each in its own process; raises TimeoutError when a
    phase does not finish.

    `sets` > 1: that many EphemeralRunnerSets of `runners` each in the one namespace, all
    scaled up at once (the scale-up phase only); counts are per runner of all of them."""
    if sets > 1 and jobs:
        raise ValueError("the jobs phase runs one set's listener: use sets=1 with jobs")
    phases: list[Phase] = []
    names = [SCALE_SET] + [f"{SCALE_SET}-{index}" for index in range(1, sets)]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = logs or Path(tmp)
        async with (
            aiohttp.ClientSession() as http,
            emulators(workdir, names, unrelated_pods=unrelated_pods) as (
                actions,
                kube_line,
                gh,
                kube,
            ),
        ):
            admin_kubeconfig = workdir / "controller.kubeconfig"
            controller = (
                controller_subprocess(admin_kubeconfig, workdir, controller_source)
                if controller_process
                else _in_process(admin_kubeconfig)
            )
            scaler_config = client.Configuration()
            await config.load_kube_config(
                config_file=str(workdir / "scaler.kubeconfig"),
                client_configuration=scaler_config,
            )
            async with (
                client.ApiClient(scaler_config) as scaler,
                controller as handle,
            ):
                bench = Bench(
                    http=http,
                    kube_admin=kube_line["admin"],
                    actions_admin=actions["admin"],
                    controller=handle,
                    children=[gh, kube],
                )
                await bench.settle(within=within)
                idle_memory = handle.memory_kib()
                phases.append(
                    await scale_up(bench, scaler, runners=runners, sets=names, within=within)
                )
                if jobs:
                    config_path = listener_config(
                        workdir,
                        actions,
                        scale_set_id=actions["scale_sets"][SCALE_SET],
                        runners=runners,
                    )
                    env = {
                        "KUBECONFIG": str(workdir / "listener.kubeconfig"),
                        "LISTENER_CONFIG_PATH": str(config_path),
                    }
                    phases.append(
                        await _jobs(
                            bench,
                            env,
                            workdir,
                            runners=runners,
                            job_seconds=job_seconds,
                            within=within,
                        )
                    )
    return Result(
        runners=runners * sets,
        unrelated_pods=unrelated_pods,
        controller_process=controller_process,
        phases=phases,
        idle_memory_kib=idle_memory,
    )


def _created(counts: Counts) -> int:
    return counts.kube["controller create ephemeralrunners"]


async def scale_up(
    bench: Bench, scaler: client.ApiClient, *, runners: int, sets: list[str], within: float
) -> Phase:
    before = await bench.snapshot()
    started = time.monotonic()
    for name in sets:
        await client.CustomObjectsApi(scaler).patch_namespaced_custom_object(
            "actions.github.com",
            "v1alpha1",
            NAMESPACE,
            "ephemeralrunnersets",
            name,
            {"spec": {"replicas": runners, "patchID": 1}},
            _content_type="application/merge-patch+json",
            _request_timeout=30,
        )
    total = runners * len(sets)
    ready = await bench.until(
        lambda: bench.all_pending_ready(total), within=within, what="all runners Pending"
    )
    await bench.settle(within=within)
    counts = (await bench.snapshot()) - before
    return Phase(
        name="scale-up",
        runners=total,
        seconds_ready=ready,
        seconds_settled=time.monotonic() - started,
        counts=counts,
        runners_created=_created(counts),
        load=_load(),
        memory_kib=bench.controller.memory_kib(),
    )


async def _jobs(
    bench: Bench,
    env: dict[str, str],
    workdir: Path,
    *,
    runners: int,
    job_seconds: float,
    within: float,
) -> Phase:
    """N jobs queued, then the real `gha-listener` process started; until every job is done and
    the set is back at 0, with no runner and no pod left."""
    before = await bench.snapshot()
    started = time.monotonic()
    # The jobs are held until the listener has its session, as for a listener already running
    # when they come: jobs done before its first statistics would leave it to scale the idle
    # set to 0 (`minRunners` 0) and the backlog of their messages back up.
    await bench.enqueue_held_jobs(runners, label=SCALE_SET)
    listener_args = [sys.executable, "-m", "listener"]
    async with spawned("listener", listener_args, workdir, env) as listener:
        bench.children.append(listener)
        try:
            await bench.until(
                bench.listener_has_session(before.actions["listener create_session"]),
                within=within,
                what="the listener's session",
            )
            await bench.release_jobs(job_seconds)
            done = await bench.until(
                bench.jobs_done_and_empty,
                within=within,
                what="jobs completed and the set back to 0",
            )
            await bench.settle(within=within)
            counts = (await bench.snapshot()) - before
        finally:
            bench.children.remove(listener)
        code = await listener.stop()
    if code != 0:
        raise RuntimeError(f"the listener exited with {code}: {log_tail(listener.log)}")
    return Phase(
        name="jobs",
        runners=runners,
        seconds_ready=done,
        seconds_settled=time.monotonic() - started,
        counts=counts,
        runners_created=_created(counts),
        load=_load(),
        memory_kib=bench.controller.memory_kib(),
    )


# --- report ----------------------------------------------------------------------------------


def _per(value: float, n: int) -> str:
    return f"{value / n:.2f}"


def _ratio(ours: float, arc: tuple[int, int]) -> str:
    low, high = arc
    if low == high:
        return f"{ours / low:.2f}x of {low}"
    return f"{ours / low:.2f}x of {low} (min), {ours / high:.2f}x of {high} (typical)"


def comparison(result: Result) -> list[tuple[str, float, str]]:
    """(what, ours per runner, against ARC) rows for the full lifecycle, or the scale-up alone."""
    n = result.runners
    counts = result.lifecycle()
    rows: list[tuple[str, float, str]] = []
    controller_kube = counts.kube_total("controller") / n
    secret_gets = counts.kube["controller get secrets"] / n
    if len(result.phases) == 1:
        rows.append(
            (
                "controller Kubernetes requests, scale-up",
                controller_kube,
                _ratio(controller_kube, ARC_SCALE_UP_CONTROLLER_KUBE),
            )
        )
        actions = counts.actions_total("controller") / n
        rows.append(
            (
                "controller Actions requests, scale-up",
                actions,
                _ratio(actions, (ARC_SCALE_UP_CONTROLLER_ACTIONS,) * 2),
            )
        )
        return rows
    listener_kube = (counts.kube_total("listener") + counts.kube_total("scaler")) / n
    rows += [
        (
            "controller Kubernetes requests",
            controller_kube,
            _ratio(controller_kube, ARC_CONTROLLER_KUBE),
        ),
        ("controller Secret GETs", secret_gets, _ratio(secret_gets, ARC_CONTROLLER_SECRET_GETS)),
        (
            "listener (and scale-up patch) Kubernetes requests",
            listener_kube,
            _ratio(listener_kube, ARC_LISTENER_KUBE),
        ),
    ]
    gc = counts.kube_total("gc") / n
    rows.append(
        (
            "garbage collector Kubernetes requests",
            gc,
            f"ARC: {ARC_GC_KUBE[0]} (it deletes the pod and JIT Secret itself)",
        )
    )
    disruption = counts.kube_total("disruption") / n
    rows.append(
        (
            "disruption controller Kubernetes requests (the busy-pod budget's status)",
            disruption,
            "ARC: 0 (it makes no budget); not in the totals below",
        )
    )
    everyone = controller_kube + listener_kube + gc
    arc_everyone = (
        ARC_CONTROLLER_KUBE[0] + ARC_LISTENER_KUBE[0] + ARC_GC_KUBE[0],
        ARC_CONTROLLER_KUBE[1] + ARC_LISTENER_KUBE[1] + ARC_GC_KUBE[1],
    )
    rows += [
        (
            "Kubernetes requests without the garbage collector (controller, listener)",
            controller_kube + listener_kube,
            _ratio(controller_kube + listener_kube, arc_everyone),
        ),
        (
            "Kubernetes requests with the garbage collector",
            everyone,
            _ratio(everyone, arc_everyone),
        ),
    ]
    for who, arc in (("controller", ARC_CONTROLLER_ACTIONS), ("listener", ARC_LISTENER_ACTIONS)):
        value = counts.actions_total(who) / n
        rows.append((f"{who} Actions requests", value, _ratio(value, arc)))
    for ctrl, (head, predicates) in ARC_RECONCILES.items():
        value = counts.metric("controller_runtime_reconcile", ctrl) / n
        rows.append(
            (
                f"{ctrl} reconciles",
                value,
                f"{value / head:.2f}x of {head} (HEAD), {value / predicates:.2f}x of "
                f"{predicates} (with predicates)",
            )
        )
    return rows


def report(result: Result) -> str:
    n = result.runners
    where = "its own process" if result.controller_process else "the bench process"
    lines = [
        f"runners: {n}; controller in {where}; machine: {platform.node()} {os.cpu_count()} "
        f"cores, Python {platform.python_version()}",
    ]
    if result.unrelated_pods:
        lines.append(f"unrelated pods in the namespace: {result.unrelated_pods}")
    if result.idle_memory_kib is not None:
        rss, peak = result.idle_memory_kib
        lines.append(f"controller memory with no runner: RSS {rss / 1024:.1f} MB")
    for phase in result.phases:
        c = phase.counts
        lines.append(
            f"\n[{phase.name}] condition after {phase.seconds_ready:.2f}s, controllers idle after "
            f"{phase.seconds_settled:.2f}s; runners created {phase.runners_created}; "
            f"load average {phase.load[0]:.2f} {phase.load[1]:.2f} {phase.load[2]:.2f}"
        )
        cpu = ", ".join(
            f"{who} {sec:.2f}s ({sec / n * 1000:.1f} ms per runner)" for who, sec in c.cpu.items()
        )
        lines.append(f"  CPU: {cpu}")
        if phase.memory_kib is not None:
            rss, peak = phase.memory_kib
            lines.append(
                f"  controller memory: RSS {rss / 1024:.1f} MB at the end, "
                f"peak {peak / 1024:.1f} MB"
            )
        skipped = c.skipped
        if skipped["jobs"]:
            lines.append(
                f"  explained jobs / jobs: {skipped['explained']} / {skipped['jobs']} = "
                f"{skipped['explained'] / skipped['jobs']:.2f}; busy-protected / busy: "
                f"{skipped['protected']} / {skipped['busy']} = "
                f"{skipped['protected'] / max(skipped['busy'], 1):.2f}; of those busy while "
                f"their pod ran: {skipped['protected_running']} / {skipped['busy_running']} = "
                f"{skipped['protected_running'] / max(skipped['busy_running'], 1):.2f}"
            )
            lines.append(
                f"  busy pod protected after the listener's write: median "
                f"{skipped['protect_ms_p50']} ms, max {skipped['protect_ms_max']} ms; an "
                f"unprotected one's job ended at most {skipped['missed_window_ms_max']} ms after "
                "that write"
            )
            lag = [(b, skipped[f"loop_lag_le_{b}"]) for b in (*LAG_BUCKETS_MS, "inf")]
            ticks = sum(n for _, n in lag)
            lines.append(
                "  Kubernetes emulator's event loop late by (share of its 50 ms ticks): "
                + ", ".join(f"<= {b} ms {n / max(ticks, 1):.3f}" for b, n in lag)
            )
        lines.append("  Kubernetes requests per runner (lists and watches: total):")
        for key, value in sorted(c.kube.items()):
            verb = key.split()[1]
            shown = str(value) if verb in ("list", "watch") else _per(value, n)
            lines.append(f"    {key}: {shown}")
        for key, value in sorted(c.kube_errors.items()):
            lines.append(f"    error {key}: {value}")
        lines.append("  Actions requests per runner (token chain and session: total):")
        for key, value in sorted(c.actions.items()):
            shown = str(value) if key.split()[1] in PER_PROCESS_ENDPOINTS else _per(value, n)
            lines.append(f"    {key}: {shown}")
        for key, value in sorted(c.actions_errors.items()):
            lines.append(f"    error {key}: {value}")
        lines.append("  runtime per runner (informer lists and failures: total):")
        for key, value in sorted(c.metrics.items()):
            informer = key.startswith("gha_runtime_informer_")
            lines.append(f"    {key}: {value if informer else _per(value, n)}")
    lines.append("\nper runner against ARC (docs/reconcilers.md#arcs-figures):")
    for what, ours, arc in comparison(result):
        lines.append(f"  {what}: {ours:.2f} = {arc}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runners", type=int, default=10, help="N, the replicas (default 10)")
    parser.add_argument("--jobs", action="store_true", help="then run N jobs and scale to 0")
    parser.add_argument("--job-seconds", type=float, default=5.0, help="each job's duration")
    parser.add_argument(
        "--controller-process",
        action="store_true",
        help="run gha-controller as a subprocess (its own core) instead of in this event loop",
    )
    parser.add_argument(
        "--logs", type=Path, help="keep the controller's log and kubeconfigs in this directory"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per phase, seconds")
    parser.add_argument(
        "--sets",
        type=int,
        default=1,
        help="EphemeralRunnerSets of --runners each, scaled up at once (no --jobs)",
    )
    parser.add_argument(
        "--unrelated-pods",
        type=int,
        default=0,
        help="pods of another application in the namespace, created first (default 0)",
    )
    parser.add_argument(
        "--controller-source",
        type=Path,
        help="with --controller-process: run the controller from this source tree",
    )
    args = parser.parse_args(argv)
    if args.controller_source is not None and not args.controller_process:
        parser.error("--controller-source runs the controller process: add --controller-process")
    if args.sets > 1 and args.jobs:
        parser.error("--jobs runs one set's listener: leave it out with --sets")
    if args.runners < 1:
        parser.error("--runners must be at least 1")
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(
        run(
            runners=args.runners,
            jobs=args.jobs,
            job_seconds=args.job_seconds,
            controller_process=args.controller_process,
            logs=args.logs,
            within=args.timeout,
            sets=args.sets,
            unrelated_pods=args.unrelated_pods,
            controller_source=args.controller_source,
        )
    )
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
