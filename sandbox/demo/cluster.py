"""The system under test: both emulators in this process, the controller and (with
`--listener docker-run`) a listener as real subprocesses.

The controller and the listener run as `gha-controller` and `gha-listener` would in a cluster and
under `docker run`, each with the token of its ServiceAccount and the RBAC of `manifests/`, so
every run also proves that those permissions are enough. The kubelet's runner containers are
the Actions emulator's simulated runners. `System.stop()` takes it all down in the order a user
would (listener, then the runner set, then the controller) and lists what was left behind.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sandbox.actions import ActionsEmulator
from sandbox.actions.runtime import RUNNER_CONTAINER, RunnerRuntime
from sandbox.kube import KubeEmulator

NAMESPACE = "arc-runners"
SCALE_SET = "demo-runners"
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
CRDS = MANIFESTS / "crds"
LISTENER_RBAC = MANIFESTS / "listener" / "rbac.yaml"
CONTROLLER_RBAC = (MANIFESTS / "namespace.yaml", MANIFESTS / "controller-rbac.yaml")
# The controller's writes in one runner namespace: a kustomize component without a namespace.
RUNNER_NAMESPACE_RBAC = MANIFESTS / "runner-namespace" / "rbac.yaml"
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"
LISTENER_USER = f"system:serviceaccount:{NAMESPACE}:gha-listener"
CONTROLLER_USER = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:gha-controller"
ER_KEY = ("actions.github.com", "ephemeralrunners")
ERS_KEY = ("actions.github.com", "ephemeralrunnersets")
# Not what a run leaves behind: events expire on their own; the namespace controller adds the
# other two to every namespace.
NOT_LEFTOVERS = {("", "events"), ("events.k8s.io", "events")}
NAMESPACE_DEFAULTS = {"configmaps/kube-root-ca.crt", "serviceaccounts/default"}
LOG_TAIL_LINES = 20
STOP_TIMEOUT = 15.0
ListenerMode = Literal["docker-run", "none"]


@dataclass(frozen=True, slots=True)
class SystemOptions:
    min_runners: int = 0
    max_runners: int = 10
    pod_start_latency: float = 0.0
    registration_latency: float = 0.0
    listener: ListenerMode = "docker-run"
    labels: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Crash:
    component: str
    exit_code: int
    log_tail: str


@dataclass
class Teardown:
    """What `System.stop()` found: each component's exit code and what was left behind."""

    exit_codes: dict[str, int | None] = field(default_factory=dict)
    kubernetes: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    reconciles: dict[str, float] = field(default_factory=dict)


class RegistrationDelay:
    """The kubelet's container runtime with a delay before a runner connects to the service,
    the time a real runner takes to start and register its session."""

    def __init__(self, runtime: RunnerRuntime, delay: float) -> None:
        self._runtime = runtime
        self.delay = delay

    async def run(
        self, *, pod: dict[str, Any], container: dict[str, Any], env: dict[str, str]
    ) -> int:
        if container.get("name") == RUNNER_CONTAINER and self.delay > 0:
            await asyncio.sleep(self.delay)
        return await self._runtime.run(pod=pod, container=container, env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def listener_rbac(*, namespace: str, name: str) -> list[dict[str, Any]]:
    """manifests/listener/rbac.yaml, pointed at a namespace and the EphemeralRunnerSet `name`."""
    docs = [d for d in yaml.safe_load_all(LISTENER_RBAC.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        for rule in doc.get("rules", []):
            if "resourceNames" in rule:
                rule["resourceNames"] = [name]
    return docs


def github_secret(*, namespace: str, pat: str, name: str = "github-config") -> dict[str, Any]:
    """The GitHub config Secret an EphemeralRunnerSet names in `githubConfigSecret`."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"github_token": base64.b64encode(pat.encode()).decode()},
    }


def runner_set(
    *, name: str, namespace: str, config_url: str, scale_set_id: int, secret: str = "github-config"
) -> dict[str, Any]:
    """An EphemeralRunnerSet at zero replicas whose runners run the simulated runner image."""
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "actions.github.com/scale-set-name": name,
                "actions.github.com/scale-set-namespace": namespace,
            },
        },
        "spec": {
            "replicas": 0,
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": config_url,
                "githubConfigSecret": secret,
                "runnerScaleSetId": scale_set_id,
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "runner",
                            "image": "ghcr.io/actions/actions-runner:latest",
                            "command": ["/home/runner/run.sh"],
                        }
                    ],
                },
            },
        },
    }


def setup_cluster(
    kube: KubeEmulator,
    *,
    config_url: str,
    pat: str,
    scale_set_id: int,
    namespace: str = NAMESPACE,
    name: str = SCALE_SET,
) -> None:
    """What a user applies: the CRDs of manifests/crds, the controller's RBAC (cluster-wide and
    in the runners' namespace) and the listener's from manifests/, the runners' namespace, the
    GitHub Secret and the EphemeralRunnerSet."""
    kube.apply_crds(sorted(CRDS.glob("*.yaml")))
    for path in CONTROLLER_RBAC:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                kube.apply(doc)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in yaml.safe_load_all(RUNNER_NAMESPACE_RBAC.read_text()):
        if doc:
            doc["metadata"]["namespace"] = namespace
            kube.apply(doc)
    kube.apply(github_secret(namespace=namespace, pat=pat))
    for doc in listener_rbac(namespace=namespace, name=name):
        kube.apply(doc)
    kube.apply(
        runner_set(name=name, namespace=namespace, config_url=config_url, scale_set_id=scale_set_id)
    )


class Component:
    """One subprocess, logging to a file, in a session of its own so that a Ctrl-C in the
    terminal reaches only the sandbox, which then stops it in order."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.name = name
        self.proc = proc
        self.log = log
        self.stopping = False

    async def stop(self) -> int:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT; returns the exit code."""
        self.stopping = True
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=STOP_TIMEOUT)
            except TimeoutError:
                self.proc.kill()
        return await self.proc.wait()


class System:
    """The running system; build it with `start_system()`."""

    def __init__(self, gh: ActionsEmulator, kube: KubeEmulator, options: SystemOptions) -> None:
        self.gh = gh
        self.kube = kube
        self.options = options
        self.pat = ""
        self.scale_set_id = 0
        self.components: dict[str, Component] = {}
        self.crashed: asyncio.Future[Crash] = asyncio.get_running_loop().create_future()
        self.controller_metrics_port = 0
        self._watchers: list[asyncio.Task[None]] = []
        self._baseline: set[str] = set()

    @property
    def labels(self) -> list[str]:
        """The labels a job queued for this scale set carries when its workload names none."""
        return [SCALE_SET]

    def namespace_objects(self) -> set[str]:
        """`kind/name` of every object in the runners' namespace, events aside."""
        found = set()
        for key, bucket in self.kube.store.buckets.items():
            if key in NOT_LEFTOVERS:
                continue
            for namespace, name in bucket.objects:
                if namespace == NAMESPACE:
                    found.add(f"{key[1]}/{name}")
        return found - NAMESPACE_DEFAULTS

    async def start_component(
        self, name: str, module: str, env: dict[str, str], workdir: Path
    ) -> None:
        log = workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                env={**os.environ, **env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        component = Component(name, proc, log)
        self.components[name] = component
        self._watchers.append(asyncio.create_task(self._watch(component)))

    async def _watch(self, component: Component) -> None:
        code = await component.proc.wait()
        if not component.stopping and not self.crashed.done():
            self.crashed.set_result(Crash(component.name, code, log_tail(component.log)))

    async def wait_ready(self, stop: asyncio.Event) -> None:
        """Until the controller has taken the runner set (its finalizer is on it) and the
        listener, if one runs, holds a session; or a component crashed, or `stop` is set."""
        while not self.crashed.done() and not stop.is_set():
            ers = self.kube.store.get(ERS_KEY, NAMESPACE, SCALE_SET) or {}
            controller = bool(ers.get("metadata", {}).get("finalizers"))
            listener = "listener" not in self.components or any(
                s.scale_set_id == self.scale_set_id for s in self.gh.state.sessions.values()
            )
            if controller and listener:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.05)

    async def scrape_reconciles(self) -> dict[str, float]:
        """controller_runtime_reconcile_total by controller, from the controller's /metrics."""
        url = f"http://127.0.0.1:{self.controller_metrics_port}/metrics"
        try:
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                text = await response.text()
        except aiohttp.ClientError:
            return {}
        totals: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "controller_runtime_reconcile_total":
                    controller = sample.labels.get("controller", "")
                    totals[controller] = totals.get(controller, 0.0) + sample.value
        return totals

    async def _settle(self, seconds: float) -> None:
        """Until the runners' namespace holds only what setup put there, or `seconds` passed."""
        subscription = self.kube.store.subscribe()
        try:
            async with asyncio.timeout(seconds):
                while self.namespace_objects() - self._baseline:
                    await subscription.queue.get()
        except TimeoutError:
            pass
        finally:
            self.kube.store.unsubscribe(subscription)

    async def stop(self, *, settle: float = 30.0) -> Teardown:
        """Stop the listener, delete the runner set, give the controller `settle` seconds to
        clean up after it, stop the controller, and list what is left in both emulators."""
        teardown = Teardown()
        listener = self.components.get("listener")
        if listener is not None:
            teardown.exit_codes["listener"] = await listener.stop()
        rt = self.kube.catalog.preferred(*ERS_KEY)
        if rt is not None and self.kube.store.get(ERS_KEY, NAMESPACE, SCALE_SET):
            self.kube.registry.delete(rt, ns=NAMESPACE, name=SCALE_SET)
        controller = self.components.get("controller")
        if controller is not None and controller.proc.returncode is None:
            await self._settle(settle)
            teardown.reconciles = await self.scrape_reconciles()
        if controller is not None:
            teardown.exit_codes["controller"] = await controller.stop()
        for task in self._watchers:
            task.cancel()
        teardown.kubernetes = sorted(self.namespace_objects() - self._baseline)
        state = self.gh.state
        teardown.actions = sorted(
            [f"runner/{r.name}" for r in state.runners.values()]
            + [f"session/{s.id}" for s in state.sessions.values()]
            + [f"job/{j.id}" for j in state.jobs.values() if j.state != "completed"]
        )
        return teardown


@contextlib.asynccontextmanager
async def start_system(options: SystemOptions, workdir: Path) -> AsyncIterator[System]:
    """Both emulators, the cluster set up as a user would, the controller and, unless
    `options.listener` is "none", a listener; all stopped on exit."""
    async with ActionsEmulator(long_poll_timeout=2.0, seed=options.seed) as gh:
        runtime = RegistrationDelay(gh.runtime, options.registration_latency)
        # TLS, as a cluster serves: kubectl sends a token over https only.
        async with KubeEmulator(
            tls=True, container_runtime=runtime, pod_start_latency=options.pod_start_latency
        ) as kube:
            system = System(gh, kube, options)
            try:
                await _start(system, workdir)
                yield system
            finally:
                for component in system.components.values():
                    await component.stop()
                for task in system._watchers:
                    task.cancel()


async def _start(system: System, workdir: Path) -> None:
    gh, kube, options = system.gh, system.kube, system.options
    system.pat = gh.add_pat()
    labels = [{"name": label} for label in sorted({SCALE_SET, *options.labels})]
    scale_set = gh.state.create_scale_set(
        name=SCALE_SET, runner_group_id=1, labels=labels, runner_setting={}
    )
    system.scale_set_id = scale_set.id
    setup_cluster(kube, scale_set_id=scale_set.id, config_url=gh.config_url(), pat=system.pat)
    system._baseline = system.namespace_objects() - {f"{ERS_KEY[1]}/{SCALE_SET}"}
    kube.write_kubeconfig(
        workdir / "controller.kubeconfig",
        token=kube.service_account_token(CONTROLLER_NAMESPACE, "gha-controller"),
    )
    kube.write_kubeconfig(
        workdir / "listener.kubeconfig", token=kube.service_account_token(NAMESPACE, "gha-listener")
    )
    config = {
        "configure_url": gh.config_url(),
        "github_token": system.pat,
        "ephemeral_runner_set_namespace": NAMESPACE,
        "ephemeral_runner_set_name": SCALE_SET,
        "runner_scale_set_id": scale_set.id,
        "min_runners": options.min_runners,
        "max_runners": options.max_runners,
        "metrics_addr": f"127.0.0.1:{free_port()}",
        "long_poll_timeout_seconds": 10,
    }
    config_path = workdir / "listener-config.json"
    config_path.write_text(json.dumps(config))
    config_path.chmod(0o600)
    system.controller_metrics_port = free_port()
    controller_env = {
        "KUBECONFIG": str(workdir / "controller.kubeconfig"),
        "GHA_CONTROLLER_LEASE_NAMESPACE": CONTROLLER_NAMESPACE,
        "GHA_CONTROLLER_METRICS_PORT": str(system.controller_metrics_port),
        "GHA_CONTROLLER_HEALTH_PORT": str(free_port()),
    }
    await system.start_component("controller", "controller", controller_env, workdir)
    if options.listener == "docker-run":
        listener_env = {
            "KUBECONFIG": str(workdir / "listener.kubeconfig"),
            "LISTENER_CONFIG_PATH": str(config_path),
        }
        await system.start_component("listener", "listener", listener_env, workdir)
