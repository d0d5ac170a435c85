"""A stand-in kubelet for a real control plane with no node: one Node object, its pods run as the
Actions emulator's simulated runners.

    python -m bench.realcp.kubelet --kubeconfig NODE_KUBECONFIG --actions-url URL [--node NAME]

It authenticates as the node (`system:node:NAME`, group `system:nodes`: a client certificate the
cluster's CA signed), so the Node authorizer and NodeRestriction admission apply to it as to a
kubelet, and the API server's audit log shows its requests under the node's name, apart from
the controllers'. It creates its Node (Ready, room for 1000 pods) and watches the pods the
scheduler binds to it. For each pod: one GET of each Secret its containers' environment names
(a real kubelet watches each one instead), a status PATCH to `Running`, the runner container run
as a simulated runner (`sandbox.actions.remote.RemoteRuntime`), and a status PATCH to
`Succeeded` or `Failed` with its exit code. A running pod deleted gracefully gets, as from a
kubelet, a status PATCH of its stopped containers and a DELETE with grace period 0 and a UID
precondition; a pod already `Succeeded` or `Failed` is deleted at once by the API server, with
nothing from the kubelet. No lease, heartbeat, Event or token request: a real kubelet's
requests beyond these are not counted here.

It prints one line, `ready`, once its Node is Ready and its watch is open.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import signal
import sys
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client, config, watch

from sandbox.actions.remote import RemoteRuntime

Obj = dict[str, Any]
STRATEGIC = "application/strategic-merge-patch+json"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
    }


def node_status() -> Obj:
    room = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
    now = _now()
    return {
        "status": {
            "capacity": room,
            "allocatable": room,
            "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "stand-in kubelet",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }


def running_status(pod: Obj) -> Obj:
    now = _now()
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "hostIP": "192.0.2.10",
            "podIP": "192.0.2.10",
            "conditions": [
                {"type": kind, "status": "True", "lastTransitionTime": now}
                for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"]["containers"]
            ],
        }
    }


def stopped_status(pod: Obj, exit_code: int, *, phase: str | None) -> Obj:
    """The containers terminated with `exit_code`; the pod's phase when it is known."""
    now = _now()
    status: Obj = {
        "conditions": [
            {"type": kind, "status": "False", "lastTransitionTime": now}
            for kind in ("ContainersReady", "Ready")
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Completed" if exit_code == 0 else "Error",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["spec"]["containers"]
        ],
    }
    if phase is not None:
        status["phase"] = phase
    return {"status": status}


class Kubelet:
    def __init__(self, api: client.ApiClient, runtime: RemoteRuntime, node: str) -> None:
        self._v1 = client.CoreV1Api(api)
        self._api = api
        self._runtime = runtime
        self._node = node
        self._started: set[str] = set()
        """UIDs of the pods this kubelet started."""
        self._running: dict[str, asyncio.Task[None]] = {}
        """UID: the task running the pod's runner container."""
        self._tasks: set[asyncio.Task[None]] = set()

    async def register(self) -> None:
        try:
            await self._v1.create_node(node_object(self._node))
        except client.ApiException as error:
            if error.status != 409:
                raise
        await self._v1.patch_node_status(self._node, node_status(), _content_type=STRATEGIC)

    async def serve(self, ready: asyncio.Event) -> None:
        version = ""
        while True:
            if not version:
                listed = await self._v1.list_pod_for_all_namespaces(
                    field_selector=f"spec.nodeName={self._node}"
                )
                for pod in listed.items:
                    self._seen("ADDED", self._api.sanitize_for_serialization(pod))
                version = listed.metadata.resource_version
                ready.set()
            stream = watch.Watch().stream(
                self._v1.list_pod_for_all_namespaces,
                field_selector=f"spec.nodeName={self._node}",
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
            )
            try:
                async for event in stream:
                    pod = self._api.sanitize_for_serialization(event["object"])
                    version = pod["metadata"].get("resourceVersion", version)
                    if event["type"] != "BOOKMARK":
                        self._seen(event["type"], pod)
            except client.ApiException as error:
                if error.status != 410:
                    raise
                version = ""

    def _seen(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if kind == "DELETED":
            task = self._running.pop(uid, None)
            if task is not None:
                task.cancel()
            self._started.discard(uid)
            return
        if meta.get("deletionTimestamp"):
            task = self._running.pop(uid, None)
            if task is not None:
                task.cancel()
                self._spawn(self._stop(pod))
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Pending" and uid not in self._started:
            self._started.add(uid)
            self._running[uid] = self._spawn(self._run(pod))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"pod failed: {task.exception()!r}", file=sys.stderr, flush=True)

    async def _secret(self, name: str, namespace: str) -> client.V1Secret:
        """The Secret, read again while the Node authorizer has not seen the pod's binding yet
        (403), as a kubelet's pod worker retries."""
        delay = 0.1
        while True:
            try:
                secret: client.V1Secret = await self._v1.read_namespaced_secret(name, namespace)
                return secret
            except client.ApiException as error:
                if error.status != 403:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _env(self, pod: Obj, container: Obj) -> dict[str, str]:
        namespace = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for var in container.get("env") or []:
            ref = (var.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                env[var["name"]] = str(var.get("value", ""))
                continue
            secret = await self._secret(ref["name"], namespace)
            env[var["name"]] = base64.b64decode((secret.data or {})[ref["key"]]).decode()
        return env

    async def _run(self, pod: Obj) -> None:
        meta = pod["metadata"]
        name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
        container = next(c for c in pod["spec"]["containers"] if c["name"] == "runner")
        env = await self._env(pod, container)
        await self._v1.patch_namespaced_pod_status(
            name, namespace, running_status(pod), _content_type=STRATEGIC
        )
        code = await self._runtime.run(pod=pod, container=container, env=env)
        self._running.pop(uid, None)
        phase = "Succeeded" if code == 0 else "Failed"
        try:
            await self._v1.patch_namespaced_pod_status(
                name, namespace, stopped_status(pod, code, phase=phase), _content_type=STRATEGIC
            )
        except client.ApiException as error:
            if error.status != 404:
                raise

    async def _stop(self, pod: Obj) -> None:
        """A running pod deleted gracefully: its containers stopped, then the final DELETE."""
        meta = pod["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        try:
            await self._v1.patch_namespaced_pod_status(
                name, namespace, stopped_status(pod, 143, phase=None), _content_type=STRATEGIC
            )
            await self._v1.delete_namespaced_pod(
                name,
                namespace,
                body=client.V1DeleteOptions(
                    grace_period_seconds=0,
                    preconditions=client.V1Preconditions(uid=meta["uid"]),
                ),
            )
        except client.ApiException as error:
            if error.status not in (404, 409):
                raise


async def _main(args: argparse.Namespace) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    runtime = RemoteRuntime(args.actions_url)
    await runtime.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with client.ApiClient(configuration) as api:
            kubelet = Kubelet(api, runtime, args.node)
            await kubelet.register()
            ready = asyncio.Event()
            serving = asyncio.create_task(kubelet.serve(ready))
            await asyncio.wait(
                [asyncio.create_task(ready.wait()), serving], return_when=asyncio.FIRST_COMPLETED
            )
            print("ready", flush=True)
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait([stopping, serving], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if serving.done():
                serving.result()
            serving.cancel()
    finally:
        await runtime.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True, help="the node's kubeconfig")
    parser.add_argument("--actions-url", required=True, help="the Actions emulator's URL")
    parser.add_argument("--node", default="worker-1", help="the node's name (default worker-1)")
    asyncio.run(_main(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
