"""End-to-end harness: the listener against sandbox.kube and sandbox.actions over loopback HTTP.

The listener authenticates to Kubernetes as the ServiceAccount of manifests/listener/rbac.yaml
(the emulator enforces RBAC), and to GitHub with a PAT the Actions emulator issued. Backoffs and
timeouts are shrunk so recovery paths run in well under a second.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio import client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from listener.app import credentials_of, serve
from listener.config import ListenerSettings
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import PersonalAccessToken
from shared.actions.models import RunnerScaleSet
from shared.actions.transport import RetryPolicy
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import Kind, Objects
from shared.typedefs import JSONDict

PROJECT = Path(__file__).resolve().parents[2]
LISTENER_RBAC = PROJECT / "manifests" / "listener" / "rbac.yaml"
RUNNER_SET_EXAMPLE = PROJECT / "manifests" / "examples" / "docker-run" / "ephemeralrunnerset.yaml"
LISTENER_SA = "gha-listener"
RUNNER_SET = "my-runners"
SCALE_SET = "my-runners"
DEADLINE = 15.0


async def eventually(
    probe: Callable[[], Awaitable[bool]], *, what: str, within: float = DEADLINE
) -> None:
    """Poll `probe` until it holds; fail with `what` at the deadline."""
    deadline = time.monotonic() + within
    while not await probe():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@dataclass
class Cluster:
    kube: KubeEmulator
    api: client.ApiClient
    objects: Objects
    namespace: str
    listener_token: str

    @property
    def listener_user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{LISTENER_SA}"

    def _stored(self, res: Kind, name: str) -> JSONDict:
        # Read past the API (and its injected faults): assertions must not depend on them.
        obj = self.kube.store.get((res.group, res.plural), self.namespace, name)
        assert obj is not None, f"{res.plural}/{name} does not exist"
        return copy.deepcopy(obj)

    async def runner_set_spec(self) -> JSONDict:
        spec: JSONDict = self._stored(EPHEMERAL_RUNNER_SET, RUNNER_SET)["spec"]
        return spec

    async def runner(self, name: str) -> JSONDict:
        return self._stored(EPHEMERAL_RUNNER, name)

    async def create_runner(
        self,
        name: str,
        *,
        phase: str,
        deleting: bool = False,
        runner_set: str = RUNNER_SET,
        owner_uid: str | None = None,
    ) -> None:
        """A runner as the controller makes it: `runner_set` is its controller owner (with
        `owner_uid` instead of the set's: an earlier set of the same name)."""
        owner = await self.objects.get(EPHEMERAL_RUNNER_SET, self.namespace, runner_set)
        body: JSONDict = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunner",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": runner_set,
                        "uid": owner_uid or owner["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy(owner["spec"]["ephemeralRunnerSpec"]),
        }
        if deleting:
            # A finalizer keeps the deleted object, with its deletionTimestamp, in place.
            body["metadata"]["finalizers"] = ["test.example.com/hold"]
        await self.objects.create(EPHEMERAL_RUNNER, self.namespace, body)
        await self.objects.patch(
            EPHEMERAL_RUNNER, self.namespace, name, {"status": {"phase": phase}}, status=True
        )
        if deleting:
            await self.objects.delete(EPHEMERAL_RUNNER, self.namespace, name)

    async def replace_runner_status(self, runner: JSONDict) -> None:
        """A PUT of the runner's status carrying its resourceVersion, as a controller writes."""
        await client.CustomObjectsApi(self.api).replace_namespaced_custom_object_status(
            EPHEMERAL_RUNNER.group,
            EPHEMERAL_RUNNER.version,
            self.namespace,
            EPHEMERAL_RUNNER.plural,
            runner["metadata"]["name"],
            runner,
            _request_timeout=10,
        )

    def forbidden_requests(self) -> int:
        return self.kube.requests.count(user=self.listener_user, code=403)


def _namespaced(doc: JSONDict, namespace: str) -> JSONDict:
    doc = copy.deepcopy(doc)
    doc["metadata"]["namespace"] = namespace
    for subject in doc.get("subjects", []):
        subject["namespace"] = namespace
    return doc


@pytest.fixture
async def kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(kubelet=False) as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


@pytest.fixture
async def cluster(kube: KubeEmulator, namespace: str) -> AsyncIterator[Cluster]:
    """A namespace with the listener RBAC of manifests/listener/ and the example runner set."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in yaml.safe_load_all(LISTENER_RBAC.read_text()):
        kube.apply(_namespaced(doc, namespace))
    runner_set = yaml.safe_load(RUNNER_SET_EXAMPLE.read_text())
    kube.apply(_namespaced(runner_set, namespace))
    api = client.ApiClient(await kube.configuration())
    try:
        yield Cluster(
            kube=kube,
            api=api,
            objects=Objects(api, timeout=10),
            namespace=namespace,
            listener_token=kube.service_account_token(namespace, LISTENER_SA),
        )
    finally:
        await api.close()


@dataclass
class RunningListener:
    task: asyncio.Task[int]
    stop_event: asyncio.Event
    port: asyncio.Future[int]
    settings: ListenerSettings

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(asyncio.shield(self.task), DEADLINE)


@dataclass
class GitHub:
    emulator: ActionsEmulator
    token: str
    client: ActionsClient
    scale_set_id: int = 0
    runners: list[asyncio.Task[int]] = field(default_factory=list)

    def enqueue(self, count: int = 1, **job: Any) -> list[int]:
        return [self.emulator.enqueue_job(labels=[SCALE_SET], **job) for _ in range(count)]

    async def start_runner(self, name: str) -> None:
        """Register runner `name` and run it as a simulated runner: it takes the next job."""
        config = await self.client.generate_jit_runner_config(self.scale_set_id, name=name)
        jit = config.encoded_jit_config.get_secret_value()
        self.runners.append(asyncio.create_task(self.emulator.runtime.run_runner(jit)))


@pytest.fixture
async def github(actions: ActionsEmulator) -> AsyncIterator[GitHub]:
    """The Actions emulator with a PAT and the scale set registered."""
    token = actions.add_pat()
    async with ActionsClient(
        config_url=actions.config_url(),
        credentials=PersonalAccessToken(token),
        retry=RetryPolicy(wait_min=0.01, wait_max=0.05),
    ) as gh_client:
        gh = GitHub(emulator=actions, token=token, client=gh_client)
        created = await gh_client.create_runner_scale_set(
            RunnerScaleSet(name=SCALE_SET, runner_group_id=1)
        )
        gh.scale_set_id = created.id
        try:
            yield gh
        finally:
            for task in gh.runners:
                task.cancel()
            await asyncio.gather(*gh.runners, return_exceptions=True)


StartListener = Callable[..., Awaitable[RunningListener]]


@dataclass
class Collector:
    """An OTLP/HTTP trace receiver on loopback."""

    url: str = ""
    requests: list[ExportTraceServiceRequest] = field(default_factory=list)

    def spans(self) -> list[Span]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
async def otlp_collector() -> AsyncIterator[Collector]:
    collector = Collector()

    async def traces(request: web.Request) -> web.Response:
        collector.requests.append(ExportTraceServiceRequest.FromString(await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    collector.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield collector
    finally:
        await runner.cleanup()


@pytest.fixture
async def start_listener(
    cluster: Cluster, github: GitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StartListener]:
    """Start `gha-listener`'s serve() in this loop; stopped (and checked) at teardown."""
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    started: list[RunningListener] = []

    async def start(*, kube_token: str | None = None, **overrides: Any) -> RunningListener:
        """`kube_token`: authenticate to Kubernetes as someone else than the listener SA."""
        if kube_token is not None:
            other = tmp_path / f"other-{len(started)}.kubeconfig"
            cluster.kube.write_kubeconfig(other, token=kube_token)
            monkeypatch.setenv("KUBECONFIG", str(other))
        values: JSONDict = {
            "configure_url": github.emulator.config_url(),
            "github_token": github.token,
            "ephemeral_runner_set_namespace": cluster.namespace,
            "ephemeral_runner_set_name": RUNNER_SET,
            "runner_scale_set_id": github.scale_set_id,
            "runner_scale_set_name": SCALE_SET,
            "min_runners": 0,
            "max_runners": 10,
            "metrics_addr": "127.0.0.1:0",
            "retry_initial_seconds": 0.01,
            "retry_max_seconds": 0.1,
            "long_poll_timeout_seconds": 5,
            "kube_request_timeout_seconds": 2,
            "session_conflict_timeout_seconds": 5,
            **overrides,
        }
        settings = ListenerSettings(**values)
        stop = asyncio.Event()
        port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(settings, credentials_of(settings), stop=stop, on_listening=port.set_result)
        )
        running = RunningListener(task=task, stop_event=stop, port=port, settings=settings)
        started.append(running)
        return running

    yield start
    for running in started:
        if not running.task.done():
            assert await running.stop() == 0


GHA_LISTENER = str(Path(sys.executable).parent / "gha-listener")
PORT_LINE = re.compile(r"serving /healthz, /readyz and /metrics on port (\d+)")


@dataclass
class Process:
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    port: asyncio.Future[int] = field(default_factory=asyncio.Future)
    reader: asyncio.Task[None] | None = None

    async def read_output(self) -> None:
        """Its log (stdout) and what it says before it has a log (stderr), one stream."""
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            line = raw.decode().rstrip("\n")
            self.lines.append(line)
            found = PORT_LINE.search(line)
            if found and not self.port.done():
                self.port.set_result(int(found.group(1)))

    async def wait(self) -> int:
        code = await asyncio.wait_for(self.proc.wait(), DEADLINE)
        if self.reader is not None:
            await self.reader
        return code


@pytest.fixture
async def spawn(cluster: Cluster, github: GitHub, tmp_path: Path) -> AsyncIterator[Any]:
    kubeconfig = tmp_path / "listener.kubeconfig"
    cluster.kube.write_kubeconfig(kubeconfig, token=cluster.listener_token)
    processes: list[Process] = []

    async def start(config: dict[str, Any], **environment: str) -> Process:
        path = tmp_path / f"config-{len(processes)}.json"
        path.write_text(json.dumps(config))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LISTENER_CONFIG_PATH": str(path),
            "LISTENER_GITHUB_TOKEN": github.token,
            "KUBECONFIG": str(kubeconfig),
            **environment,
        }
        env = {name: value for name, value in env.items() if value}
        proc = await asyncio.create_subprocess_exec(
            GHA_LISTENER, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        process = Process(proc=proc)
        process.reader = asyncio.create_task(process.read_output())
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.proc.returncode is None:
            process.proc.kill()
            await process.wait()


def listener_config(cluster: Cluster, github: GitHub, **changes: Any) -> dict[str, Any]:
    return {
        "configure_url": github.emulator.config_url(),
        "ephemeral_runner_set_namespace": cluster.namespace,
        "ephemeral_runner_set_name": RUNNER_SET,
        "runner_scale_set_name": SCALE_SET,
        "min_runners": 0,
        "max_runners": 10,
        "log_level": "debug",
        "log_format": "json",
        "metrics_addr": "127.0.0.1:0",
        "retry_initial_seconds": 0.05,
        "retry_max_seconds": 0.2,
        **changes,
    }


async def readyz_until(process: Process, *, ready: bool) -> str:
    """Poll the process's /readyz until it answers 200 (`ready`) or not; its last body."""
    port = await asyncio.wait_for(asyncio.shield(process.port), DEADLINE)
    body = ""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:

        async def answered() -> bool:
            nonlocal body
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                body = await response.text()
                return (response.status == 200) is ready

        await eventually(answered, what=f"/readyz {'200' if ready else 'non-200'}")
    return body


async def wait_ready(process: Process) -> None:
    await readyz_until(process, ready=True)


def messages(process: Process) -> list[str]:
    """The messages of the process's JSON log lines."""
    return [str(json.loads(line)["msg"]) for line in process.lines]
