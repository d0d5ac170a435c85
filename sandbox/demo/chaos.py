"""`gha-sandbox demo --chaos MIX`: faults injected into a demo run while the invariants are
checked, the jobs a fault killed retried, and the faults and the recovery time reported.

A mix names fault kinds (MIXES; a kind's own name is a mix of one, and mixes join with commas).
The injector fires one kind at a time, at exponential gaps averaging `60 / rate` simulated
seconds, cycling through the mix in a seeded order, so that every kind fires at least once. It
keeps going until a whole round has fired and most of the workload is done; the run settles only
after that. What each kind does, and why the run must still end with every invariant held, is in
docs/sandbox.md#chaos.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import statistics
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from sandbox import leash
from sandbox.demo.cluster import (
    CONTROLLER_LABEL,
    CONTROLLER_NAMESPACE,
    ER_KEY,
    NAMESPACE,
    Component,
    System,
    free_port,
)
from sandbox.demo.observe import Observer
from sandbox.demo.report import failures

POD_KEY = ("", "pods")
LEASE_KEY = ("coordination.k8s.io", "leases")
KINDS: dict[str, tuple[str, ...]] = {
    "kube-api": ("kube-5xx", "kube-429", "kube-timeout"),
    "kube-watch": ("watch-drop", "watch-gone"),
    "actions-api": (
        "actions-5xx",
        "actions-429",
        "token-expiry",
        "session-conflict",
        "session-eviction",
        "empty-response",
    ),
    "processes": ("listener-kill", "controller-kill"),
    "pods": ("runner-start-failure", "node-lost"),
    "control-plane": ("control-plane-outage",),
}
MIXES: dict[str, tuple[str, ...]] = KINDS | {
    "all": tuple(kind for kinds in KINDS.values() for kind in kinds)
}
ALL_KINDS = MIXES["all"]
# How long a windowed fault (error rates, a stalled API server, crashing runners) lasts, in
# simulated seconds, and the error rate while it lasts. Shorter than the mean gap between faults
# at the default rate, so that the system also runs between faults.
WINDOW = 10.0
ERROR_RATE = 0.2
# The run stops injecting once a full round has fired and this share of the jobs is done.
QUIET_AFTER = 0.8
STANDBY = "controller-2"
POLL = 0.05
# The service's session expiry (simulated seconds), and its floor in wall seconds: a live
# listener polls at least every long-poll timeout (2 s in the demo).
SESSION_TIMEOUT = 120.0
MIN_SESSION_TIMEOUT = 6.0
# A control-plane outage lasts this many times the controller's informer retry maximum (wall
# seconds: the informers' backoff runs in real time), and the new API server then sends no
# bookmark for this many times its watch inactivity timeout; both from the controller's settings
# in the demo's environment (GHA_CONTROLLER_*), else the controller's defaults.
OUTAGE_OVER_RETRY_MAX = 1.5
QUIET_OVER_INACTIVITY = 1.5
# How long the restarted API server's watch caches take to initialise (429s), wall seconds.
CACHE_INIT = 0.5


def controller_setting(name: str, default: float) -> float:
    """A controller setting as the demo passes it on (`GHA_CONTROLLER_<NAME>`)."""
    return float(os.environ.get(f"GHA_CONTROLLER_{name}", default))


class Extension(Protocol):
    """What the run loop asks of a mode added to a demo run (chaos, soak)."""

    def settled(self) -> bool:
        """Whether the run may end once the workload has settled."""

    async def stop(self) -> None:
        """Called before the teardown."""

    def amend(self, report: dict[str, Any]) -> None:
        """Add this mode's figures to the report."""


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chaos",
        type=parse_mix,
        metavar="MIX",
        help=f"inject faults while the workload runs: {', '.join(MIXES)}, or fault kinds, "
        "comma-separated (docs/sandbox.md#chaos)",
    )
    parser.add_argument(
        "--chaos-rate",
        type=float,
        default=3.0,
        help="with --chaos, faults per simulated minute on average (3)",
    )


async def attach(
    args: argparse.Namespace,
    system: System,
    observer: Observer,
    ids: list[int],
    *,
    workdir: Path,
    total_jobs: int,
) -> list[Extension]:
    """The modes the flags ask for, started."""
    from sandbox.demo.drain import NodeDrain
    from sandbox.demo.soak import Soak

    extras: list[Extension] = []
    if args.chaos:
        chaos = Chaos(
            system,
            observer,
            kinds=args.chaos,
            rate=args.chaos_rate,
            speedup=args.speedup,
            seed=args.seed,
            total_jobs=total_jobs,
            ids=ids,
            workdir=workdir,
        )
        await chaos.start()
        extras.append(chaos)
    if args.soak is not None:
        soak = Soak(system, observer, minutes=args.soak)
        soak.start()
        extras.append(soak)
    if args.drain_at is not None:
        node_drain = NodeDrain(system, observer, at=args.drain_at, speedup=args.speedup)
        node_drain.start()
        extras.append(node_drain)
    return extras


def parse_mix(text: str) -> tuple[str, ...]:
    """The fault kinds of a mix: names of MIXES or of single kinds, joined by commas."""
    kinds: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if name in MIXES:
            kinds += MIXES[name]
        elif name in ALL_KINDS:
            kinds.append(name)
        else:
            raise argparse.ArgumentTypeError(
                f"unknown fault mix {name!r}: one of {', '.join(MIXES)} or a kind: "
                f"{', '.join(ALL_KINDS)}"
            )
    return tuple(dict.fromkeys(kinds))


def proc_environ(pid: int) -> dict[str, str]:
    """A running process's environment, as Linux shows it in /proc."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(): value.decode(errors="replace") for key, value in pairs}


def proc_module(pid: int) -> str:
    """The module of a `python -m MODULE` process."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return argv[argv.index(b"-m") + 1].decode()


class Chaos:
    """Injects the faults of a mix into a running system and retries the jobs they killed."""

    def __init__(
        self,
        system: System,
        observer: Observer,
        *,
        kinds: tuple[str, ...],
        rate: float,
        speedup: float,
        seed: int,
        total_jobs: int,
        ids: list[int],
        workdir: Path,
    ) -> None:
        self.system = system
        self.observer = observer
        self.kinds = kinds
        self.rate = rate
        self.speedup = speedup
        self.total_jobs = total_jobs
        self.ids = ids
        self.workdir = workdir
        self.random = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.last_fault_at: float | None = None
        self.hit_jobs: set[int] = set()
        self.retried: dict[int, int] = {}
        self.restarts: Counter[str] = Counter()
        self.quiet = asyncio.Event()
        self.identities: dict[str, str] = {}
        self.killed_holders: set[str] = set()
        self.attempted: set[str] = set()
        self.outage_to_runner: list[float] = []
        """Per control-plane outage after which a job waited: wall seconds from the API
        server's return to the first EphemeralRunner created after it."""
        self._generation = 0
        self._task: asyncio.Task[None] | None = None
        self._retrier: asyncio.Task[None] | None = None
        self._actions: dict[str, Callable[[], Awaitable[bool]]] = {
            "kube-5xx": self._kube_5xx,
            "kube-429": self._kube_429,
            "kube-timeout": self._kube_timeout,
            "watch-drop": self._watch_drop,
            "watch-gone": self._watch_gone,
            "actions-5xx": self._actions_5xx,
            "actions-429": self._actions_429,
            "token-expiry": self._token_expiry,
            "session-conflict": self._session_conflict,
            "session-eviction": self._session_eviction,
            "empty-response": self._empty_response,
            "listener-kill": self._listener_kill,
            "controller-kill": self._controller_kill,
            "runner-start-failure": self._runner_start_failure,
            "node-lost": self._node_lost,
            "control-plane-outage": self._control_plane_outage,
        }

    # --- the run --------------------------------------------------------------------------

    async def start(self) -> None:
        """Compress the service's session expiry like every other simulated time, start a
        second controller replica when the mix kills controllers (so that a kill is a leader
        failover), then the injector and the retrier."""
        # A listener killed with -9 leaves its session behind; the service lets a new one take
        # over once it has gone unpolled this long, and its restart waits for that (409s).
        data = self.system.gh.state.data
        data.session_timeout = max(SESSION_TIMEOUT / self.speedup, MIN_SESSION_TIMEOUT)
        if "controller-kill" in self.kinds and "controller" in self.system.components:
            await self._spawn(self.system.components["controller"], STANDBY, new_ports=True)
        self._task = asyncio.create_task(self._inject())
        self._retrier = asyncio.create_task(self._retry())

    async def stop(self) -> None:
        """Stop injecting and lift every fault still in force."""
        for task in (self._task, self._retrier):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.system.kube.faults.clear()
        self.system.gh.faults.clear()
        self.quiet.set()

    def settled(self) -> bool:
        """Injection is over and every job a fault killed has been queued again."""
        return self.quiet.is_set() and self.hit_jobs <= self.retried.keys()

    def _done_share(self) -> float:
        jobs = self.system.gh.state.jobs
        done = sum(
            1
            for job in jobs.values()
            if job.state == "completed" and job.final_result != "canceled"
        )
        return done / self.total_jobs if self.total_jobs else 1.0

    def _all_done(self) -> bool:
        jobs = self.system.gh.state.jobs
        return len(self.ids) >= self.total_jobs and all(
            jobs[i].state == "completed" for i in self.ids
        )

    def _enough(self) -> bool:
        """Every kind has fired and most jobs are done; or all jobs are done and every kind has
        had its turn (one that needs a busy runner cannot fire then)."""
        every_kind = set(self.kinds) <= set(self.injected)
        if every_kind and self._done_share() >= QUIET_AFTER:
            return True
        return set(self.kinds) <= self.attempted and self._all_done()

    async def _inject(self) -> None:
        """Fire the mix's kinds in seeded rounds, one at a time: each after the system is back
        from the one before and a random gap has passed, so the workload runs between faults.
        """
        while True:
            order = list(self.kinds)
            self.random.shuffle(order)
            for kind in order:
                await self._until_healthy()
                await asyncio.sleep(self.random.expovariate(self.rate / 60.0) / self.speedup)
                if self._enough():
                    self.quiet.set()
                    return
                self.attempted.add(kind)
                if await self._actions[kind]():
                    self.injected[kind] += 1
                    self.last_fault_at = self.observer.elapsed()

    def healthy(self) -> bool:
        """The system is back from the last fault: no fault rule left in either emulator, the
        listener holds a session, and a controller other than a killed one holds the lease
        (docker-run: every process is running)."""
        kube, gh = self.system.kube, self.system.gh
        if kube.faults.rules or kube.faults.paused:
            return False
        if any(not fault.exhausted() for fault in gh.faults.active):
            return False
        if gh.faults.runner_crash_exit_code is not None:
            return False
        if not any(s.scale_set_id == self.system.scale_set_id for s in gh.state.sessions.values()):
            return False
        if any(c.proc.returncode is not None for c in self.system.components.values()):
            return False
        lease = next(iter(kube.store.items(LEASE_KEY)), None)
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        return bool(holder) and holder not in self.killed_holders

    async def _until_healthy(self) -> None:
        while True:
            if self.healthy() or self._enough():
                return
            await asyncio.sleep(POLL)

    async def _retry(self) -> None:
        """Queue a copy of every job a fault killed, as a workflow re-run would."""
        state = self.system.gh.state
        while True:
            for job_id in sorted(self.hit_jobs - self.retried.keys()):
                job = state.jobs[job_id]
                if job.state == "completed":
                    self.retried[job_id] = (
                        self._requeue(job_id) if job.final_result == "canceled" else job_id
                    )
            await asyncio.sleep(POLL)

    def _requeue(self, job_id: int) -> int:
        old = self.system.gh.state.jobs[job_id]
        new = self.system.gh.enqueue_job(
            labels=list(old.labels),
            duration=old.duration,
            result=old.result,
            display_name=f"{old.display_name} (retry)",
        )
        self.ids.append(new)
        return new

    async def _window(self, undo: Callable[[], None]) -> None:
        await asyncio.sleep(WINDOW / self.speedup)
        undo()

    # --- Kubernetes API -------------------------------------------------------------------

    async def _kube_error(self, status: int) -> bool:
        faults = self.system.kube.faults
        rule = faults.error_rate(ERROR_RATE, status=status)
        await self._window(lambda: faults.remove(rule))
        return True

    async def _kube_5xx(self) -> bool:
        return await self._kube_error(self.random.choice((500, 503)))

    async def _kube_429(self) -> bool:
        return await self._kube_error(429)

    async def _kube_timeout(self) -> bool:
        """The API server stalls: every request hangs until the window ends, so clients with a
        shorter deadline time out."""
        faults = self.system.kube.faults
        faults.pause()
        await self._window(faults.resume)
        return True

    async def _control_plane_outage(self) -> bool:
        """The API server is down for longer than the controller's informer retry maximum
        (every request but the leader lease's 503, open watches ended), comes back with its
        watch caches initialising (429s), then leaves quiet watches without a bookmark for
        longer than the controller's inactivity timeout, as a real one did. Times the first
        runner created afterwards."""
        faults = self.system.kube.faults
        # Leases are spared: a controller whose lease lapses exits and is started again, which
        # the `processes` mix covers; here the informers of a controller that stays up are.
        down = faults.inject(status=503, spared=("leases",))
        faults.restart(
            quiet=QUIET_OVER_INACTIVITY * controller_setting("WATCH_INACTIVITY_TIMEOUT", 70.0)
        )
        await asyncio.sleep(OUTAGE_OVER_RETRY_MAX * controller_setting("WATCH_RETRY_MAX", 30.0))
        faults.remove(down)
        await asyncio.sleep(CACHE_INIT)
        faults.initialized()
        back = asyncio.get_running_loop().time()
        if not self._jobs_waiting():
            return True
        before = {r["metadata"]["name"] for r in self.system.kube.store.items(ER_KEY, NAMESPACE)}
        while not self._all_done():
            names = {r["metadata"]["name"] for r in self.system.kube.store.items(ER_KEY, NAMESPACE)}
            if names - before:
                self.outage_to_runner.append(asyncio.get_running_loop().time() - back)
                break
            await asyncio.sleep(POLL)
        return True

    def _jobs_waiting(self) -> bool:
        """A job no runner has started yet."""
        jobs = self.system.gh.state.jobs.values()
        return any(job.state not in ("started", "completed") for job in jobs)

    async def _watch_drop(self) -> bool:
        self.system.kube.faults.drop_watches()
        return True

    async def _watch_gone(self) -> bool:
        self.system.kube.faults.force_gone()
        return True

    # --- Actions service ------------------------------------------------------------------

    async def _actions_error(self, status: int, retry_after: float | None = None) -> bool:
        faults = self.system.gh.faults
        fault = faults.inject("*", status=status, rate=ERROR_RATE, retry_after=retry_after)
        await self._window(lambda: faults.remove(fault))
        return True

    async def _actions_5xx(self) -> bool:
        return await self._actions_error(self.random.choice((500, 502, 503)))

    async def _actions_429(self) -> bool:
        return await self._actions_error(429, retry_after=1)

    async def _token_expiry(self) -> bool:
        self.system.gh.faults.expire_tokens()
        return True

    async def _session_conflict(self) -> bool:
        """The session is lost and the next create answers 409, as when another listener of the
        set still holds one."""
        faults = self.system.gh.faults
        fault = faults.inject("create_session", status=409, count=1)
        faults.evict_sessions(self.system.scale_set_id)
        await self._window(lambda: faults.remove(fault))
        return True

    async def _session_eviction(self) -> bool:
        return self.system.gh.faults.evict_sessions(self.system.scale_set_id) > 0

    async def _empty_response(self) -> bool:
        faults = self.system.gh.faults
        empty = [
            faults.inject(endpoint, empty_body=True, count=1)
            for endpoint in ("get_message", "acquire_jobs", "get_runner_by_name")
        ]
        # An endpoint no one calls in the window keeps its fault no longer than that.
        await asyncio.sleep(WINDOW / self.speedup)
        for fault in empty:
            faults.remove(fault)
        return True

    # --- pods -----------------------------------------------------------------------------

    async def _runner_start_failure(self) -> bool:
        """Runners that come up during the window exit 1 before taking a job."""
        faults = self.system.gh.faults
        faults.crash_runners(1)
        await self._window(lambda: faults.crash_runners(None))
        return True

    async def _node_lost(self) -> bool:
        """The node under a busy runner goes: its pod is deleted at once, the kubelet stops the
        runner, and the service cancels its job. Waits for a busy runner while jobs remain."""
        while True:
            busy = self._busy_runners()
            if busy or self._all_done():
                break
            await asyncio.sleep(POLL)
        if not busy:
            return False
        kube = self.system.kube
        pods = kube.catalog.preferred(*POD_KEY)
        assert pods is not None
        name, job_id = self.random.choice(busy)
        self.hit_jobs.add(job_id)
        with contextlib.suppress(Exception):
            kube.registry.delete(pods, ns=NAMESPACE, name=name, options={"gracePeriodSeconds": 0})
        return True

    def _busy_runners(self) -> list[tuple[str, int]]:
        """(runner, job) of each runner whose pod exists and whose job has started."""
        kube, state = self.system.kube, self.system.gh.state
        busy: list[tuple[str, int]] = []
        for runner in kube.store.items(ER_KEY, NAMESPACE):
            runner_id = (runner.get("status") or {}).get("runnerId")
            record = state.runners.get(runner_id) if isinstance(runner_id, int) else None
            job = state.jobs.get(record.job_id) if record and record.job_id is not None else None
            name = runner["metadata"]["name"]
            if (
                job is not None
                and job.state == "started"
                and kube.store.get(POD_KEY, NAMESPACE, name)
            ):
                busy.append((name, job.id))
        return busy

    # --- processes ------------------------------------------------------------------------

    async def _listener_kill(self) -> bool:
        component = self.system.components.get("listener")
        if component is not None:
            await self._kill_and_restart(component)
            return True
        return self._delete_pod(lambda pod: not _is_controller(pod))

    async def _controller_kill(self) -> bool:
        """Kill the leader and start it again, as a Deployment would; with two replicas the
        other takes over once the lease expires."""
        lease = next(iter(self.system.kube.store.items(LEASE_KEY)), None)
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
        self.killed_holders.add(holder)
        components = self.system.components
        if "controller" in components:
            leader = next(
                (name for name, identity in self.identities.items() if identity == holder),
                "controller",
            )
            await self._kill_and_restart(components[leader])
            return True
        leaders = await self._leader_pods()
        return self._delete_pod(lambda pod: pod["metadata"]["name"] in leaders)

    async def _leader_pods(self) -> set[str]:
        """In-cluster: the controller pods whose /metrics say they hold the lease."""
        kube = self.system.kube
        pods = [p for p in kube.store.items(POD_KEY, CONTROLLER_NAMESPACE) if _is_controller(p)]
        leaders = set()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            for pod in pods:
                if kube.processes is None:
                    break
                address = kube.processes.loopback_address(pod)
                for container in pod["spec"]["containers"]:
                    for port in container.get("ports") or []:
                        if port.get("name") != "metrics":
                            continue
                        url = f"http://{address}:{port['containerPort']}/metrics"
                        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                            async with session.get(url) as response:
                                text = await response.text()
                            if _leads(text):
                                leaders.add(pod["metadata"]["name"])
        return leaders

    def _delete_pod(self, match: Callable[[dict[str, Any]], bool]) -> bool:
        """In-cluster: the pod goes at once (SIGKILL, no grace) and its owner makes another,
        as when its node dies."""
        kube = self.system.kube
        pods = kube.catalog.preferred(*POD_KEY)
        hit = [
            pod
            for pod in kube.store.items(POD_KEY, CONTROLLER_NAMESPACE)
            if match(pod) and "deletionTimestamp" not in pod["metadata"]
        ]
        if pods is None or not hit:
            return False
        pod = self.random.choice(hit)
        self.restarts["listener" if not _is_controller(pod) else "controller"] += 1
        with contextlib.suppress(Exception):
            kube.registry.delete(
                pods,
                ns=CONTROLLER_NAMESPACE,
                name=pod["metadata"]["name"],
                options={"gracePeriodSeconds": 0},
            )
        return True

    async def _kill_and_restart(self, component: Component) -> None:
        """SIGKILL, then the same command with the same environment, its log appended."""
        component.stopping = True
        env = proc_environ(component.proc.pid)
        module = proc_module(component.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            component.proc.send_signal(signal.SIGKILL)
        await component.proc.wait()
        self.restarts[component.name] += 1
        await self._spawn(component, component.name, env=env, module=module)

    async def _spawn(
        self,
        like: Component,
        name: str,
        *,
        env: dict[str, str] | None = None,
        module: str | None = None,
        new_ports: bool = False,
    ) -> None:
        env = dict(env if env is not None else proc_environ(like.proc.pid))
        module = module or proc_module(like.proc.pid)
        if new_ports:
            env["GHA_CONTROLLER_METRICS_PORT"] = str(free_port())
            env["GHA_CONTROLLER_HEALTH_PORT"] = str(free_port())
        if module == "controller":
            # A new identity per process, as a restarted pod has; named so the injector knows
            # which process holds the lease.
            self._generation += 1
            env["GHA_CONTROLLER_IDENTITY"] = f"{name}-{self._generation}"
            self.identities[name] = env["GHA_CONTROLLER_IDENTITY"]
        log = self.workdir / f"{name}.log"
        with log.open("ab") as out:
            proc = await asyncio.create_subprocess_exec(
                *leash.command(sys.executable, "-m", module),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        component = Component(name, proc, log)
        self.system.components[name] = component
        self.system._watchers.append(asyncio.create_task(self.system._watch(component)))

    # --- the report -----------------------------------------------------------------------

    def amend(self, report: dict[str, Any]) -> None:
        """Add `faults` and `recovery_time_s`; a job a fault killed (and that was retried)
        counts as neither lost nor killed by the autoscaler."""
        killed = self.observer.killed_jobs - self.hit_jobs
        report["runners"]["killed_while_busy"] = len(killed)
        report["faults"] = {
            "mix": list(self.kinds),
            "rate_per_min": self.rate,
            "injected": dict(sorted(self.injected.items())),
            "total": sum(self.injected.values()),
            "jobs_killed_by_faults": len(self.observer.killed_jobs & self.hit_jobs),
            "jobs_retried": sum(1 for old, new in self.retried.items() if old != new),
            "restarts": dict(sorted(self.restarts.items())),
        }
        report["recovery_time_s"] = self.recovery_time()
        if "control-plane-outage" in self.kinds:
            report["faults"]["outage_to_first_runner_s"] = _percentiles(self.outage_to_runner)
        report["workload"]["missing"] = max(
            0, report["workload"]["missing"] + report["faults"]["jobs_retried"]
        )
        report["ok"] = failures(report) == []

    def recovery_time(self) -> float | None:
        """Simulated seconds from the end of the last fault to the first moment every job was
        done and the set back at its minimum; None if that never happened."""
        if self.last_fault_at is None:
            return 0.0
        floor = self.system.options.min_runners
        for sample in self.observer.samples:
            if (
                sample.t >= self.last_fault_at
                and sample.waiting == 0
                and sample.running == 0
                and sample.desired == floor
                and sum(sample.phases.values()) == floor
            ):
                return round(sample.t - self.last_fault_at, 2)
        return None


def _percentiles(values: list[float]) -> dict[str, Any]:
    """`n`, `p50` and `p99` (wall seconds, nearest rank), None without a value."""
    if not values:
        return {"n": 0, "p50": None, "p99": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"n": len(ordered), "p50": round(statistics.median(ordered), 2), "p99": rank(0.99)}


def _leads(metrics: str) -> bool:
    return any(
        sample.name == "leader_election_master_status" and sample.value == 1
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
    )


def _is_controller(pod: dict[str, Any]) -> bool:
    key, value = CONTROLLER_LABEL
    return (pod["metadata"].get("labels") or {}).get(key) == value
