"""The pod lifecycle of the simulated scheduler + kubelet (docs/sandbox-kube.md#the-kubelet).

Each pod is bound to one of the kubelet's nodes (`scheduler.schedule`; a pod no node can take
stays Pending with PodScheduled=False until a node event lets it in), then walked through the
status writes a real kubelet makes, each a separate write with its own resourceVersion and watch
event:

1. binding: `spec.nodeName` and condition PodScheduled=True;
2. first sync: hostIP, startTime, conditions, containers waiting in `ContainerCreating`;
3. after `start_latency`: the sandbox is up (podIP, PodReadyToStartContainers=True);
4. init containers run one by one (each: running, then terminated);
5. containers running: phase Running, Ready=True;
6. each container exit: its terminated state; when all have exited (restartPolicy Never, or
   OnFailure with exit 0) the phase becomes Succeeded or Failed.

Exit codes come from the pluggable ContainerRuntime. Deleting a pod cancels its containers,
records their termination (the phase still `Running`), then the terminal phase in a later write,
then finishes the graceful deletion: a real kubelet's order, so a client must take a terminated
container as done whatever the phase says. A started container's status carries the user it runs
as (`user.linux`: uid, gid, supplementalGroups) when the emulator knows the uid.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from sandbox.kube.clock import timestamp
from sandbox.kube.kinds.pods import TERMINAL_PHASES
from sandbox.kube.kubelet.env import MissingReference, resolve_env
from sandbox.kube.kubelet.node import NODE_NAME, node_ip, pod_subnet, register_node
from sandbox.kube.kubelet.podstatus import (
    container_id,
    container_user,
    image_id,
    mark_config_error,
    mark_exited,
    mark_ready,
    mark_restarted,
    not_ready_message,
    set_condition,
    terminated_state,
    waiting_status,
)
from sandbox.kube.kubelet.runtime import RUNTIME_FAILURE_EXIT, SIGTERM_EXIT, ContainerRuntime
from sandbox.kube.kubelet.scheduler import schedule
from sandbox.kube.registry import Registry
from sandbox.kube.status import ApiError
from sandbox.kube.store import Event, Store

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.kubelet")

PODS = ("", "pods")
NODES = ("", "nodes")


class Kubelet:
    def __init__(
        self,
        *,
        registry: Registry,
        store: Store,
        runtime: ContainerRuntime,
        start_latency: float,
        restart_backoff: float = 1.0,
        config_retry: float = 0.2,
        probe_interval: float = 0.5,
        nodes: tuple[str, ...] = (NODE_NAME,),
    ) -> None:
        self.nodes = nodes
        self.registry = registry
        self.store = store
        self.runtime = runtime
        self.start_latency = start_latency
        self.restart_backoff = restart_backoff
        self.config_retry = config_retry
        self.probe_interval = probe_interval
        self.workers: dict[str, asyncio.Task[None]] = {}
        self.deleting: dict[str, asyncio.Event] = {}
        self._next_ip = 1
        self.killed: dict[str, dict[str, int]] = {}
        self.pending: set[str] = set()
        """Pods no node could take yet, scheduled again on the next node event."""

    def register_node(self) -> None:
        for index, name in enumerate(self.nodes):
            register_node(self.registry, self.store, name=name, index=index)

    async def run(self) -> None:
        sub = self.store.subscribe({PODS, NODES})
        try:
            for pod in list(self.store.items(PODS)):
                self._observe(pod)
            while True:
                item = await sub.queue.get()
                if not isinstance(item, Event):
                    continue
                if item.key == NODES:
                    if item.type != "DELETED":
                        self._retry_pending()
                elif item.type == "DELETED":
                    self._forget(item.obj["metadata"]["uid"])
                else:
                    self._observe(item.obj)
        finally:
            self.store.unsubscribe(sub)
            for task in list(self.workers.values()):
                task.cancel()
            for task in list(self.workers.values()):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _observe(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node not in self.nodes:
            return
        if not node and not pod["metadata"].get("deletionTimestamp"):
            if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                return
            node = self._schedule(uid, pod)
            if node is None:
                return
        if pod["metadata"].get("deletionTimestamp"):
            if uid in self.deleting:
                self.deleting[uid].set()
            elif node:
                self.deleting[uid] = asyncio.Event()
                self.deleting[uid].set()
                self.workers[uid] = asyncio.create_task(self._terminate_only(uid))
            return
        if uid in self.workers or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        self.deleting[uid] = asyncio.Event()
        self.workers[uid] = asyncio.create_task(self._pod(uid), name=f"kubelet-{uid}")

    def _retry_pending(self) -> None:
        for uid in list(self.pending):
            pod = self._pod_obj(uid)
            if pod is None:
                self.pending.discard(uid)
            else:
                self._observe(pod)

    def _forget(self, uid: str) -> None:
        self.pending.discard(uid)
        self.deleting.pop(uid, None)
        task = self.workers.pop(uid, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    # --- writes ------------------------------------------------------------------------------

    def _pod_obj(self, uid: str) -> Obj | None:
        return self.store.by_uid(uid)

    def _write_status(self, uid: str, mutate: Callable[[Obj, Obj], None]) -> Obj | None:
        cur = self._pod_obj(uid)
        rt = self.registry.catalog.preferred(*PODS)
        if cur is None or rt is None:
            return None
        new = copy.deepcopy(cur)
        mutate(new.setdefault("status", {}), new)
        try:
            self.registry.commit(rt, cur=cur, new=new, subresource="status")
        except ApiError as exc:
            log.debug("kubelet status write failed: %s", exc.message)
        return self._pod_obj(uid)

    def _schedule(self, uid: str, pod: Obj) -> str | None:
        """Bind the pod to a node, or report why none fits (PodScheduled=False)."""
        rt = self.registry.catalog.preferred(*PODS)
        current = self._pod_obj(uid)
        if rt is None or current is None or current["metadata"].get("deletionTimestamp"):
            return None
        bound = (current.get("spec") or {}).get("nodeName")
        if bound:
            return str(bound) if bound in self.nodes else None
        pod = current
        placement = schedule(
            pod,
            nodes=list(self.store.items(NODES)),
            runnable=self.nodes,
            pods=self.store.items(PODS),
        )
        now = timestamp(self.registry.clock())
        new = copy.deepcopy(pod)
        status = new.setdefault("status", {})
        if placement.node is None:
            self.pending.add(uid)
            before = [c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"]
            if before and before[0].get("message") == placement.message:
                return None
            set_condition(
                status,
                "PodScheduled",
                value="False",
                now=now,
                reason="Unschedulable",
                message=placement.message,
            )
            try:
                self.registry.commit(rt, cur=pod, new=new, subresource="status")
            except ApiError as exc:
                log.debug("scheduler status write failed: %s", exc.message)
            return None
        self.pending.discard(uid)
        new["spec"]["nodeName"] = placement.node
        set_condition(status, "PodScheduled", value="True", now=now)
        # The binding subresource sets nodeName and the PodScheduled condition in one write,
        # past the pod-update validation that forbids changing the spec.
        self.store.put(rt.key, new, event="MODIFIED", old=pod)
        return placement.node

    # --- the pod lifecycle -------------------------------------------------------------------

    async def _pod(self, uid: str) -> None:
        deleting = self.deleting[uid]
        try:
            pod = self._pod_obj(uid)
            if pod is None:
                return
            index = self.nodes.index(pod["spec"]["nodeName"])
            host_ip = node_ip(index)
            now = timestamp(self.registry.clock())
            has_init = bool(pod["spec"].get("initContainers"))

            def first_sync(status: Obj, p: Obj) -> None:
                status["phase"] = "Pending"
                status["hostIP"] = host_ip
                status["hostIPs"] = [{"ip": host_ip}]
                status["startTime"] = now
                set_condition(status, "PodReadyToStartContainers", value="False", now=now)
                set_condition(
                    status,
                    "Initialized",
                    value="False" if has_init else "True",
                    now=now,
                    reason="ContainersNotInitialized" if has_init else None,
                    message="containers with incomplete status: ["
                    + " ".join(c["name"] for c in p["spec"].get("initContainers") or [])
                    + "]"
                    if has_init
                    else None,
                )
                set_condition(
                    status,
                    "Ready",
                    value="False",
                    now=now,
                    reason="ContainersNotReady",
                    message=not_ready_message(p),
                )
                set_condition(
                    status,
                    "ContainersReady",
                    value="False",
                    now=now,
                    reason="ContainersNotReady",
                    message=not_ready_message(p),
                )
                set_condition(status, "PodScheduled", value="True", now=now)
                if has_init:
                    status["initContainerStatuses"] = [
                        waiting_status(c, "PodInitializing") for c in p["spec"]["initContainers"]
                    ]
                status["containerStatuses"] = [
                    waiting_status(c, "PodInitializing" if has_init else "ContainerCreating")
                    for c in p["spec"].get("containers") or []
                ]

            self._write_status(uid, first_sync)
            if await _wait_or_deleted(deleting, self.start_latency):
                await self._terminate(uid, {})
                return
            # One counter for every node, so the last octet (the project's processes' loopback
            # address, sandbox.kube.kubelet.process) stays unique across nodes.
            ip = f"{pod_subnet(index)}.{self._next_ip % 250 + 2}"
            self._next_ip += 1

            def sandbox_ready(status: Obj, p: Obj) -> None:
                status["podIP"] = ip
                status["podIPs"] = [{"ip": ip}]
                set_condition(
                    status,
                    "PodReadyToStartContainers",
                    value="True",
                    now=timestamp(self.registry.clock()),
                )

            pod = self._write_status(uid, sandbox_ready)
            if pod is None:
                return
            for container in pod["spec"].get("initContainers") or []:
                code = await self._run_init(uid, container, deleting=deleting)
                if code is None:
                    await self._terminate(uid, {})
                    return
                if code != 0 and pod["spec"].get("restartPolicy") == "Never":
                    self._write_status(uid, lambda s, p: s.update(phase="Failed"))
                    return
            await self._run_main(uid, deleting)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet worker failed for pod %s", uid)

    async def _env(
        self, uid: str, container: Obj, *, deleting: asyncio.Event
    ) -> dict[str, str] | None:
        """The resolved environment, waiting (CreateContainerConfigError) for missing refs."""
        reported = False
        while True:
            pod = self._pod_obj(uid)
            if pod is None:
                return None
            try:
                return self.resolve_env(pod, container)
            except MissingReference as exc:
                if not reported:
                    mutate = functools.partial(
                        mark_config_error, name=container["name"], message=str(exc)
                    )
                    self._write_status(uid, mutate)
                    reported = True
                if await _wait_or_deleted(deleting, self.config_retry):
                    return None

    def resolve_env(self, pod: Obj, container: Obj) -> dict[str, str]:
        return resolve_env(self.store, pod, container)

    async def _run_container(
        self, uid: str, container: Obj, *, deleting: asyncio.Event, env: dict[str, str]
    ) -> int | None:
        """Run one container through the runtime; None when the pod was deleted first."""
        pod = self._pod_obj(uid)
        if pod is None:
            return None
        task = asyncio.create_task(
            self.runtime.run(pod=copy.deepcopy(pod), container=copy.deepcopy(container), env=env)
        )
        stop = asyncio.create_task(deleting.wait())
        try:
            done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The emulator is stopping: the container goes with it, awaited so no task leaks.
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise
        finally:
            stop.cancel()
        if task in done:
            if task.exception() is not None:
                log.warning(
                    "container %s of pod %s failed to run: %r",
                    container["name"],
                    uid,
                    task.exception(),
                )
                return RUNTIME_FAILURE_EXIT
            return int(task.result())
        task.cancel()
        try:
            code = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            code = SIGTERM_EXIT
        self._record_kill(uid, container["name"], code=int(code))
        return None

    def _record_kill(self, uid: str, name: str, *, code: int) -> None:
        self.killed.setdefault(uid, {})[name] = code

    async def _run_init(self, uid: str, container: Obj, *, deleting: asyncio.Event) -> int | None:
        name = container["name"]
        started = timestamp(self.registry.clock())

        def running(status: Obj, p: Obj) -> None:
            for cs in status.get("initContainerStatuses") or []:
                if cs["name"] == name:
                    cs.update(
                        state={"running": {"startedAt": started}},
                        started=True,
                        containerID=container_id(uid, name),
                        imageID=image_id(cs),
                    )
                    user = container_user(p, container)
                    if user is not None:
                        cs["user"] = user

        env = await self._env(uid, container, deleting=deleting)
        if env is None:
            return None
        self._write_status(uid, running)
        code = await self._run_container(uid, container, deleting=deleting, env=env)
        if code is None:
            return None
        finished = timestamp(self.registry.clock())

        def terminated(status: Obj, p: Obj) -> None:
            for cs in status.get("initContainerStatuses") or []:
                if cs["name"] == name:
                    cs.update(
                        state={
                            "terminated": terminated_state(
                                code,
                                started=started,
                                finished=finished,
                                container_id=container_id(uid, name),
                            )
                        },
                        started=False,
                        ready=code == 0,
                    )
            statuses = status.get("initContainerStatuses") or []
            if all(
                "terminated" in s.get("state", {}) and s["state"]["terminated"]["exitCode"] == 0
                for s in statuses
            ):
                set_condition(status, "Initialized", value="True", now=finished)
                for cs in status.get("containerStatuses") or []:
                    cs["state"] = {"waiting": {"reason": "ContainerCreating"}}

        self._write_status(uid, terminated)
        return code

    async def _run_main(self, uid: str, deleting: asyncio.Event) -> None:
        pod = self._pod_obj(uid)
        if pod is None:
            return
        containers = pod["spec"].get("containers") or []
        policy = pod["spec"].get("restartPolicy", "Always")
        started = timestamp(self.registry.clock())

        probed = self._probed(pod, containers)

        by_name = {c["name"]: c for c in containers}

        def running(status: Obj, p: Obj) -> None:
            status["phase"] = "Running"
            for cs in status.get("containerStatuses") or []:
                cs.update(
                    state={"running": {"startedAt": started}},
                    ready=cs["name"] not in probed,
                    started=True,
                    containerID=container_id(uid, cs["name"]),
                    imageID=image_id(cs),
                )
                user = container_user(p, by_name.get(cs["name"]) or {})
                if user is not None:
                    cs["user"] = user
            set_condition(status, "Initialized", value="True", now=started)
            mark_ready(status, p, name="", ready=True, at=started)

        envs: dict[str, dict[str, str]] = {}
        for c in containers:
            env = await self._env(uid, c, deleting=deleting)
            if env is None:
                await self._terminate(uid, {})
                return
            envs[c["name"]] = env
        self._write_status(uid, running)
        results: dict[str, int] = {}
        tasks = {
            c["name"]: asyncio.create_task(
                self._container_loop(
                    uid,
                    c,
                    policy=policy,
                    deleting=deleting,
                    results=results,
                    env=envs[c["name"]],
                    probed=c["name"] in probed,
                )
            )
            for c in containers
        }
        probes = [
            asyncio.create_task(self._probe(uid, c, probed[c["name"]], deleting))
            for c in containers
            if c["name"] in probed
        ]
        try:
            await asyncio.gather(*tasks.values())
        finally:
            for t in [*tasks.values(), *probes]:
                t.cancel()
            for t in probes:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        if deleting.is_set() or self._pod_obj(uid) is None:
            await self._terminate(uid, results)
            return
        phase = "Succeeded" if all(code == 0 for code in results.values()) else "Failed"
        now = timestamp(self.registry.clock())

        def finish(status: Obj, p: Obj) -> None:
            status["phase"] = phase
            set_condition(status, "Ready", value="False", now=now, reason="PodCompleted")
            set_condition(status, "ContainersReady", value="False", now=now, reason="PodCompleted")
            set_condition(status, "PodReadyToStartContainers", value="False", now=now)

        self._write_status(uid, finish)

    async def _container_loop(
        self,
        uid: str,
        container: Obj,
        *,
        policy: str,
        deleting: asyncio.Event,
        results: dict[str, int],
        env: dict[str, str],
        probed: bool = False,
    ) -> None:
        name = container["name"]
        restarts = 0
        while True:
            started = timestamp(self.registry.clock())
            code = await self._run_container(uid, container, deleting=deleting, env=env)
            if code is None:
                return
            finished = timestamp(self.registry.clock())
            results[name] = code
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
            state = terminated_state(
                code, started=started, finished=finished, container_id=container_id(uid, name)
            )
            self._write_status(
                uid,
                functools.partial(
                    mark_exited, name=name, state=state, restart=restart, at=finished
                ),
            )
            if not restart:
                return
            # Exponential back-off between restarts, as the kubelet's CrashLoopBackOff (capped).
            if await _wait_or_deleted(deleting, self.restart_backoff * 2 ** min(restarts, 5)):
                return
            restarts += 1
            resolved = await self._env(uid, container, deleting=deleting)
            if resolved is None:
                return
            env = resolved
            again = timestamp(self.registry.clock())
            self._write_status(
                uid,
                functools.partial(
                    mark_restarted, name=name, at=again, count=restarts, ready=not probed
                ),
            )

    # --- readiness probes --------------------------------------------------------------------

    def _probed(self, pod: Obj, containers: list[Obj]) -> dict[str, str]:
        """Containers whose readinessProbe httpGet can be reached (the runtime says where);
        others are ready once running."""
        probe_host = getattr(self.runtime, "probe_host", None)
        if probe_host is None:
            return {}
        out = {}
        for c in containers:
            probe = c.get("readinessProbe")
            if not isinstance(probe, dict) or not isinstance(probe.get("httpGet"), dict):
                continue
            host = probe_host(pod=pod, container=c)
            if host:
                out[c["name"]] = str(host)
        return out

    async def _probe(self, uid: str, container: Obj, host: str, deleting: asyncio.Event) -> None:
        probe = container["readinessProbe"]
        get = probe["httpGet"]
        port = get.get("port")
        if isinstance(port, str) and not port.isdigit():
            port = next(
                (
                    p.get("containerPort")
                    for p in container.get("ports") or []
                    if isinstance(p, dict) and p.get("name") == port
                ),
                None,
            )
        scheme = str(get.get("scheme", "HTTP")).lower()
        url = f"{scheme}://{get.get('host') or host}:{port}{get.get('path', '/')}"
        try:
            period = min(float(probe.get("periodSeconds", 10)), self.probe_interval)
            threshold = int(probe.get("failureThreshold", 3))
            timeout = aiohttp.ClientTimeout(total=float(probe.get("timeoutSeconds", 1)))
        except (TypeError, ValueError):
            log.warning(
                "pod %s: container %s has an unusable readinessProbe", uid, container["name"]
            )
            return
        name = container["name"]
        failures = 0
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as http:
            while True:
                try:
                    async with http.get(url, ssl=False) as resp:
                        ok = 200 <= resp.status < 400
                except (aiohttp.ClientError, TimeoutError, ValueError, OSError):
                    ok = False
                failures = 0 if ok else failures + 1
                pod = self._pod_obj(uid)
                if pod is None:
                    return
                ready = any(
                    cs["name"] == name and cs.get("ready")
                    for cs in (pod.get("status") or {}).get("containerStatuses") or []
                )
                if ok != ready and (ok or failures >= threshold):
                    now = timestamp(self.registry.clock())
                    self._write_status(
                        uid, functools.partial(mark_ready, name=name, ready=ok, at=now)
                    )
                if await _wait_or_deleted(deleting, period):
                    return

    async def _terminate_only(self, uid: str) -> None:
        await self._terminate(uid, {})

    async def _terminate(self, uid: str, results: dict[str, int]) -> None:
        """Graceful deletion: record the killed containers (the phase as it was), then the
        terminal phase in a write of its own, as a real kubelet reports them (its container
        statuses come from the runtime's events, the phase from a later pod sync), then
        delete."""
        killed = self.killed.pop(uid, {})
        now = timestamp(self.registry.clock())
        codes = dict(results)

        def stopped(status: Obj, p: Obj) -> None:
            for cs in status.get("containerStatuses") or []:
                state = cs.get("state") or {}
                if "terminated" in state:
                    codes[cs["name"]] = state["terminated"]["exitCode"]
                    continue
                code = killed.get(cs["name"], SIGTERM_EXIT)
                codes[cs["name"]] = code
                started = (state.get("running") or {}).get("startedAt")
                cs["state"] = {
                    "terminated": terminated_state(
                        code, started=started, finished=now, container_id=cs.get("containerID", "")
                    )
                }
                cs["ready"] = False
                cs["started"] = False
            message = not_ready_message(p)
            for ctype in ("Ready", "ContainersReady"):
                set_condition(
                    status,
                    ctype,
                    value="False",
                    now=now,
                    reason="ContainersNotReady",
                    message=message,
                )

        def ended(status: Obj, p: Obj) -> None:
            if status.get("phase") not in TERMINAL_PHASES and status.get("containerStatuses"):
                status["phase"] = (
                    "Succeeded" if codes and all(c == 0 for c in codes.values()) else "Failed"
                )
            set_condition(status, "Ready", value="False", now=now, reason="PodCompleted")
            set_condition(status, "ContainersReady", value="False", now=now, reason="PodCompleted")

        self._write_status(uid, stopped)
        pod = self._write_status(uid, ended)
        rt = self.registry.catalog.preferred(*PODS)
        if pod is None or rt is None:
            return
        with contextlib.suppress(ApiError):
            self.registry.delete(
                rt,
                ns=pod["metadata"]["namespace"],
                name=pod["metadata"]["name"],
                options={"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )


async def _wait_or_deleted(deleting: asyncio.Event, seconds: float) -> bool:
    """Sleep, ending early (and returning True) if the pod is being deleted."""
    if deleting.is_set():
        return True
    if seconds <= 0:
        await asyncio.sleep(0)
        return deleting.is_set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(deleting.wait(), seconds)
    return deleting.is_set()
