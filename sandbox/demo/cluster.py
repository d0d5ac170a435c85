"""The system under test: both emulators in this process, and the controller and listener as
real `gha-controller` and `gha-listener` processes.

In-cluster (the default) the Kubernetes emulator's kubelet runs them: `manifests/` is applied (the
controller's Deployment, two replicas electing a leader), then the runner namespace component,
the GitHub Secret and the example AutoscalingRunnerSet; the controller registers the scale set
and makes the listener pod. With `--listener docker-run` the demo starts them itself as
subprocesses, as `docker run` would outside a cluster, against an EphemeralRunnerSet it applies.
Either way each runs with its ServiceAccount's token and RBAC, so every run also proves those
permissions are enough. The kubelet's runner containers are the Actions emulator's simulated
runners. `System.stop()` takes it all down in the order a user would and lists what was left.
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

from sandbox import MANIFESTS, leash
from sandbox.actions import ActionsEmulator
from sandbox.actions.runtime import RUNNER_CONTAINER, RunnerRuntime
from sandbox.kube import KubeEmulator
from sandbox.kube.store import Event

NAMESPACE = "arc-runners"
ADMIN_KUBECONFIG = "kubeconfig"
"""The cluster admin's kubeconfig `gha-sandbox up` writes into its workdir."""
SCALE_SET = "demo-runners"
CRDS = MANIFESTS / "crds"
LISTENER_RBAC = MANIFESTS / "listener" / "rbac.yaml"
CONTROLLER_RBAC = (MANIFESTS / "namespace.yaml", MANIFESTS / "controller-rbac.yaml")
# The controller's writes in one runner namespace: a kustomize component without a namespace.
RUNNER_NAMESPACE_RBAC = MANIFESTS / "runner-namespace" / "rbac.yaml"
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"
LISTENER_USER = f"system:serviceaccount:{NAMESPACE}:gha-listener"
INSTALL = MANIFESTS / "kustomization.yaml"
EXAMPLE_SET = MANIFESTS / "examples" / "autoscalingrunnerset.yaml"
CONTROLLER_DEPLOYMENT = "gha-controller"
CONTROLLER_LABEL = ("app.kubernetes.io/name", "gha-controller")
ARS_KEY = ("actions.github.com", "autoscalingrunnersets")
LISTENER_KEY = ("actions.github.com", "autoscalinglisteners")
POD_KEY = ("", "pods")
DEPLOYMENT_KEY = ("apps", "deployments")
# Scale set id annotation the controller writes on the AutoscalingRunnerSet (docs/autoscaling.md).
SCALE_SET_ID = "runner-scale-set-id"
CONTROLLER_ENV_PREFIX = "GHA_CONTROLLER_"
# The controller's own state in its namespace, not something a runner set leaves behind.
CONTROLLER_STATE = {("coordination.k8s.io", "leases"), ("apps", "replicasets")}
CONTROLLER_USER = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:gha-controller"
ER_KEY = ("actions.github.com", "ephemeralrunners")
ERS_KEY = ("actions.github.com", "ephemeralrunnersets")
NAMESPACES_KEY = ("", "namespaces")
# Not what a run leaves behind: events expire on their own; the namespace controller adds the
# other two to every namespace.
NOT_LEFTOVERS = {("", "events"), ("events.k8s.io", "events")}
NAMESPACE_DEFAULTS = {"configmaps/kube-root-ca.crt", "serviceaccounts/default"}
LOG_TAIL_LINES = 20
STOP_TIMEOUT = 15.0
ListenerMode = Literal["in-cluster", "docker-run", "none"]


@dataclass(frozen=True, slots=True)
class SystemOptions:
    min_runners: int = 0
    max_runners: int = 10
    pod_start_latency: float = 0.0
    registration_latency: float = 0.0
    nodes: int = 1
    """Worker nodes of the Kubernetes emulator (sandbox-node, sandbox-node-2, ...)."""
    listener: ListenerMode = "in-cluster"
    labels: tuple[str, ...] = ()
    seed: int = 0
    scaling_policy: dict[str, Any] | None = None
    """The AutoscalingRunnerSet's `spec.scalingPolicy` (docker-run: the listener's
    `scaling_policy`), as docs/policies.md writes it; None leaves ARC's formula."""
    listener_exit_stops: bool = True
    """A listener that exits stops the system (a crash); False (`up`) records the exit in
    `System.exits` and keeps the rest running, e.g. while its runner namespace is deleted."""


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
    wakes: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per controller, its wakes by `watch event fields` (docs/controller-runtime.md#wakes)."""


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


def _kustomization_resources(directory: Path) -> list[dict[str, Any]]:
    """The objects of a kustomization's `resources` (files, or directories through their own
    kustomization), in order."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            docs += _kustomization_resources(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def install_manifests(controller_env: dict[str, str]) -> list[dict[str, Any]]:
    """What `kubectl apply -k manifests/` applies, read without kubectl: the resources, the
    controller's image at the tag of `images:`, and the listener image variable set to that
    image as the kustomization's replacement does; `controller_env` is added to the
    controller container's environment."""
    kustomization = yaml.safe_load(INSTALL.read_text())
    tags = {i["name"]: i["newTag"] for i in kustomization.get("images", [])}
    docs = _kustomization_resources(INSTALL.parent)
    for doc in docs:
        if doc["kind"] != "Deployment" or doc["metadata"]["name"] != CONTROLLER_DEPLOYMENT:
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            image = container["image"]
            if image in tags:
                container["image"] = image = f"{image}:{tags[image]}"
            env = [e for e in container.get("env", []) if e["name"] not in controller_env]
            for variable in env:
                if variable["name"] == "CONTROLLER_MANAGER_CONTAINER_IMAGE":
                    variable["value"] = image
            container["env"] = env + [{"name": k, "value": v} for k, v in controller_env.items()]
    return docs


def example_set(
    *, config_url: str, name: str, namespace: str, min_runners: int, max_runners: int,
    labels: list[str], scaling_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """manifests/examples/autoscalingrunnerset.yaml pointed at the Actions emulator, with the
    demo's name, bounds and scale set labels."""
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE_SET.read_text())
    doc["metadata"].update(name=name, namespace=namespace)
    doc["spec"].update(
        githubConfigUrl=config_url,
        minRunners=min_runners,
        maxRunners=max_runners,
        runnerScaleSetLabels=labels,
    )
    if scaling_policy is not None:
        doc["spec"]["scalingPolicy"] = scaling_policy
    return doc


def setup_in_cluster(kube: KubeEmulator, *, pat: str, controller_env: dict[str, str]) -> None:
    """What a user applies before the runner set: `manifests/`, the runners' namespace with
    the controller's Role there (the runner-namespace component), and the GitHub Secret."""
    for doc in install_manifests(controller_env):
        if doc["kind"] == "CustomResourceDefinition":
            kube.apply_crds([doc])
        else:
            kube.apply(doc)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for doc in yaml.safe_load_all(RUNNER_NAMESPACE_RBAC.read_text()):
        if doc:
            doc["metadata"]["namespace"] = NAMESPACE
            kube.apply(doc)
    kube.apply(github_secret(namespace=NAMESPACE, pat=pat))


def container_exit_code(pod: dict[str, Any]) -> tuple[str, int] | None:
    """A container of the pod that exited non-zero, now or before its last restart."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in (status.get("state"), status.get("lastState")):
            code = ((state or {}).get("terminated") or {}).get("exitCode")
            if code:
                return status["name"], int(code)
    return None


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

    def __init__(
        self, gh: ActionsEmulator, kube: KubeEmulator, options: SystemOptions, workdir: Path
    ) -> None:
        self.gh = gh
        self.workdir = workdir
        self.kube = kube
        self.options = options
        self.pat = ""
        self.scale_set_id = 0
        self.components: dict[str, Component] = {}
        self.crashed: asyncio.Future[Crash] = asyncio.get_running_loop().create_future()
        # Exits that did not stop the system (options.listener_exit_stops False), in order.
        self.exits: list[Crash] = []
        self.controller_metrics_port = 0
        self._watchers: list[asyncio.Task[None]] = []
        self._baseline: set[str] = set()
        # In-cluster: the identity the listener pod runs as (named after its AutoscalingListener),
        # what the controller namespace held before the runner set, and each component's last
        # exit code as its pods report it.
        self.listener_user = LISTENER_USER
        self._system_baseline: set[str] = set()
        self._stopping = False
        self._pod_exit_codes: dict[str, dict[str, int]] = {}
        self._pods: dict[str, dict[str, Any]] = {}

    @property
    def in_cluster(self) -> bool:
        return self.options.listener == "in-cluster"

    def runner_set_name(self) -> str:
        """The EphemeralRunnerSet's name: in-cluster the controller generates it."""
        names = [obj["metadata"]["name"] for obj in self.kube.store.items(ERS_KEY, NAMESPACE)]
        return names[0] if names else SCALE_SET

    @property
    def labels(self) -> list[str]:
        """The labels a job queued for this scale set carries when its workload names none."""
        return [SCALE_SET]

    def namespace_objects(self, namespace: str = NAMESPACE) -> set[str]:
        """`kind/name` of every object in a namespace, events aside."""
        found = set()
        for key, bucket in self.kube.store.buckets.items():
            if key in NOT_LEFTOVERS:
                continue
            for ns, name in bucket.objects:
                if ns == namespace:
                    found.add(f"{key[1]}/{name}")
        return found - NAMESPACE_DEFAULTS

    def listener_objects(self) -> set[str]:
        """`kind/name` of what the controller namespace holds beyond the install: a listener,
        its pod, ServiceAccount and Secrets (the controller's pods, ReplicaSets and lease aside)."""
        found = set()
        for key, bucket in self.kube.store.buckets.items():
            if key in NOT_LEFTOVERS or key in CONTROLLER_STATE:
                continue
            for (ns, name), obj in bucket.objects.items():
                labels = obj["metadata"].get("labels") or {}
                if (
                    ns == CONTROLLER_NAMESPACE
                    and labels.get(CONTROLLER_LABEL[0]) != (CONTROLLER_LABEL[1])
                ):
                    found.add(f"{key[1]}/{name}")
        return found - self._system_baseline - NAMESPACE_DEFAULTS

    async def start_component(
        self, name: str, module: str, env: dict[str, str], workdir: Path
    ) -> None:
        log = workdir / f"{name}.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *leash.command(sys.executable, "-m", module),
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
        if not component.stopping:
            self._exited(Crash(component.name, code, log_tail(component.log)))

    def _exited(self, exit: Crash) -> None:
        """A component ended before `stop()`: a crash, or an exit the system outlives."""
        if exit.component == "listener" and not self.options.listener_exit_stops:
            if exit not in self.exits:  # a pod's status repeats its last exit
                self.exits.append(exit)
        elif not self.crashed.done():
            self.crashed.set_result(exit)

    async def _watch_pods(self) -> None:
        """In-cluster: each component's exit codes from its pods' container statuses; a
        non-zero one before `stop()` is a crash, reported with the tail of the pod's log."""
        subscription = self.kube.store.subscribe({POD_KEY})
        try:
            while True:
                event = await subscription.queue.get()
                if not isinstance(event, Event):
                    return
                pod = event.obj
                if pod["metadata"].get("namespace") != CONTROLLER_NAMESPACE:
                    continue
                self._pods[pod["metadata"]["name"]] = pod
                labels = pod["metadata"].get("labels") or {}
                component = (
                    "controller"
                    if labels.get(CONTROLLER_LABEL[0]) == CONTROLLER_LABEL[1]
                    else "listener"
                )
                codes = self._pod_exit_codes.setdefault(component, {})
                for status in (pod.get("status") or {}).get("containerStatuses") or []:
                    terminated = (status.get("state") or {}).get("terminated")
                    if terminated is not None:
                        codes[pod["metadata"]["name"]] = int(terminated.get("exitCode") or 0)
                failed = container_exit_code(pod)
                if failed is not None and not self._stopping:
                    container, code = failed
                    logs = self.kube.processes.logs(pod, container) if self.kube.processes else ""
                    tail = "\n".join(logs.splitlines()[-LOG_TAIL_LINES:])
                    self._exited(Crash(component, code, tail))
        finally:
            self.kube.store.unsubscribe(subscription)

    def _exit_code(self, component: str) -> int | None:
        """The worst exit code of a component's pods; None when none has exited."""
        codes = self._pod_exit_codes.get(component) or {}
        return max(codes.values(), key=lambda code: (code != 0, code)) if codes else None

    def _in_cluster_ready(self) -> bool:
        """The scale set registered, the runner set taken by the controller, the listener's
        identity known and its session open; records the scale set id and that identity."""
        ars = self.kube.store.get(ARS_KEY, NAMESPACE, SCALE_SET) or {}
        scale_set_id = (ars.get("metadata", {}).get("annotations") or {}).get(SCALE_SET_ID)
        listeners = list(self.kube.store.items(LISTENER_KEY, CONTROLLER_NAMESPACE))
        if scale_set_id is None or not listeners:
            return False
        self.scale_set_id = int(scale_set_id)
        name = listeners[0]["metadata"]["name"]
        self.listener_user = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:{name}"
        return any(s.scale_set_id == self.scale_set_id for s in self.gh.state.sessions.values())

    async def wait_ready(self, stop: asyncio.Event) -> None:
        """Until the controller has taken the runner set (its finalizer is on it) and the
        listener, if one runs, holds a session; or a component crashed, or `stop` is set."""
        while not self.crashed.done() and not stop.is_set():
            ers = self.kube.store.get(ERS_KEY, NAMESPACE, self.runner_set_name()) or {}
            controller = bool(ers.get("metadata", {}).get("finalizers"))
            if self.in_cluster:
                listener = self._in_cluster_ready()
            else:
                listener = "listener" not in self.components or any(
                    s.scale_set_id == self.scale_set_id for s in self.gh.state.sessions.values()
                )
            if controller and listener:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.05)

    def _metrics_urls(self) -> list[str]:
        if not self.in_cluster:
            return [f"http://127.0.0.1:{self.controller_metrics_port}/metrics"]
        urls = []
        processes = self.kube.processes
        for pod in self.kube.store.items(POD_KEY, CONTROLLER_NAMESPACE):
            labels = pod["metadata"].get("labels") or {}
            if processes is None or labels.get(CONTROLLER_LABEL[0]) != CONTROLLER_LABEL[1]:
                continue
            for container in pod["spec"]["containers"]:
                for port in container.get("ports") or []:
                    if port.get("name") == "metrics":
                        address = processes.loopback_address(pod)
                        urls.append(f"http://{address}:{port['containerPort']}/metrics")
        return urls

    async def scrape_reconciles(self, teardown: Teardown) -> None:
        """controller_runtime_reconcile_total by controller, and gha_runtime_wakes_total by
        controller and cause, from the /metrics of every controller process (in-cluster: both
        replicas; the follower reconciles nothing) into `teardown`."""
        async with aiohttp.ClientSession() as session:
            for url in self._metrics_urls():
                try:
                    async with session.get(url) as response:
                        text = await response.text()
                except aiohttp.ClientError:
                    continue
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        controller = sample.labels.get("controller", "")
                        if sample.name == "controller_runtime_reconcile_total":
                            totals = teardown.reconciles
                            totals[controller] = totals.get(controller, 0.0) + sample.value
                        elif sample.name == "gha_runtime_wakes_total":
                            labels = sample.labels
                            cause = " ".join(
                                part
                                for part in (
                                    labels.get("watch"),
                                    labels.get("event"),
                                    labels.get("fields"),
                                )
                                if part
                            )
                            causes = teardown.wakes.setdefault(controller, {})
                            causes[cause] = causes.get(cause, 0.0) + sample.value

    def _leftovers(self) -> set[str]:
        left = self.namespace_objects() - self._baseline
        namespace = self.kube.store.get(NAMESPACES_KEY, "", NAMESPACE)
        if namespace is not None and namespace["metadata"].get("deletionTimestamp"):
            left.add(f"namespaces/{NAMESPACE} (Terminating)")
        if self.in_cluster:
            left |= {f"{CONTROLLER_NAMESPACE}/{item}" for item in self.listener_objects()}
        return left

    async def _settle(self, seconds: float) -> None:
        """Until nothing is left beyond what setup put there, or `seconds` passed."""
        subscription = self.kube.store.subscribe()
        try:
            async with asyncio.timeout(seconds):
                while self._leftovers():
                    await subscription.queue.get()
        except TimeoutError:
            pass
        finally:
            self.kube.store.unsubscribe(subscription)

    async def _stop_deployment(self) -> None:
        """Delete the controller's Deployment and wait until its pods are gone (the kubelet
        stops each process with SIGTERM, then SIGKILL after the grace period)."""
        rt = self.kube.catalog.preferred(*DEPLOYMENT_KEY)
        if rt is None or not self.kube.store.get(
            DEPLOYMENT_KEY, CONTROLLER_NAMESPACE, CONTROLLER_DEPLOYMENT
        ):
            return
        self.kube.registry.delete(rt, ns=CONTROLLER_NAMESPACE, name=CONTROLLER_DEPLOYMENT)
        subscription = self.kube.store.subscribe({POD_KEY})

        def controller_pods() -> bool:
            return any(
                (p["metadata"].get("labels") or {}).get(CONTROLLER_LABEL[0]) == CONTROLLER_LABEL[1]
                for p in self.kube.store.items(POD_KEY, CONTROLLER_NAMESPACE)
            )

        try:
            async with asyncio.timeout(STOP_TIMEOUT * 4):
                while controller_pods():
                    await subscription.queue.get()
        except TimeoutError:
            pass
        finally:
            self.kube.store.unsubscribe(subscription)

    def _save_pod_logs(self) -> None:
        """Each controller and listener pod's log as `<pod>.log` in the workdir, where the
        docker-run path leaves its processes' logs (the kubelet's copies go with the emulator)."""
        if self.kube.processes is None:
            return
        for name, pod in self._pods.items():
            for container in pod["spec"]["containers"]:
                text = self.kube.processes.logs(pod, container["name"])
                if text:
                    (self.workdir / f"{name}.log").write_text(text)

    async def stop(self, *, settle: float = 30.0) -> Teardown:
        """Take the system down as a user would and list what is left in both emulators.

        In-cluster: delete the AutoscalingRunnerSet, give the controller `settle` seconds to
        remove the listener, the runners and the scale set, then stop the controller.
        docker-run: stop the listener, delete the runner set, let the controller clean up after
        it, then stop the controller."""
        teardown = Teardown()
        self._stopping = True
        if self.in_cluster:
            rt = self.kube.catalog.preferred(*ARS_KEY)
            if rt is not None and self.kube.store.get(ARS_KEY, NAMESPACE, SCALE_SET):
                self.kube.registry.delete(rt, ns=NAMESPACE, name=SCALE_SET)
            await self._settle(settle)
            await self.scrape_reconciles(teardown)
            left = self._leftovers()
            await self._stop_deployment()
            self._save_pod_logs()
            teardown.exit_codes = {
                "listener": self._exit_code("listener"),
                "controller": self._exit_code("controller"),
            }
        else:
            listener = self.components.get("listener")
            if listener is not None:
                teardown.exit_codes["listener"] = await listener.stop()
            rt = self.kube.catalog.preferred(*ERS_KEY)
            if rt is not None and self.kube.store.get(ERS_KEY, NAMESPACE, SCALE_SET):
                self.kube.registry.delete(rt, ns=NAMESPACE, name=SCALE_SET)
            controller = self.components.get("controller")
            if controller is not None and controller.proc.returncode is None:
                await self._settle(settle)
                await self.scrape_reconciles(teardown)
            left = self._leftovers()
            if controller is not None:
                teardown.exit_codes["controller"] = await controller.stop()
        for task in self._watchers:
            task.cancel()
        teardown.kubernetes = sorted(left)
        state = self.gh.state
        teardown.actions = sorted(
            [f"runner/{r.name}" for r in state.runners.values()]
            + [f"session/{s.id}" for s in state.sessions.values()]
            + [f"job/{j.id}" for j in state.jobs.values() if j.state != "completed"]
            + (
                [f"scale-set/{s.name}" for s in state.scale_sets.values()]
                if self.in_cluster
                else []
            )
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
            tls=True,
            container_runtime=runtime,
            pod_start_latency=options.pod_start_latency,
            run_project_image=options.listener == "in-cluster",
            nodes=options.nodes,
        ) as kube:
            system = System(gh, kube, options, workdir)
            try:
                if system.in_cluster:
                    _start_in_cluster(system)
                else:
                    await _start(system, workdir)
                yield system
            finally:
                for component in system.components.values():
                    await component.stop()
                for task in system._watchers:
                    task.cancel()


def _start_in_cluster(system: System) -> None:
    """Apply `manifests/` (the kubelet starts the controller's Deployment), the runner
    namespace, the GitHub Secret and the example AutoscalingRunnerSet; the controller registers
    the scale set and makes the listener pod."""
    gh, kube, options = system.gh, system.kube, system.options
    system.pat = gh.add_pat()
    system._watchers.append(asyncio.create_task(system._watch_pods()))
    # The controller settings a docker-run controller inherits from the demo's environment,
    # GHA_CONTROLLER_LISTENER_* (the listener pods' settings) among them, go into the Deployment.
    controller_env = {k: v for k, v in os.environ.items() if k.startswith(CONTROLLER_ENV_PREFIX)}
    setup_in_cluster(kube, pat=system.pat, controller_env=controller_env)
    system._baseline = system.namespace_objects()
    system._system_baseline = system.namespace_objects(CONTROLLER_NAMESPACE)
    kube.apply(
        example_set(
            config_url=gh.config_url(),
            name=SCALE_SET,
            namespace=NAMESPACE,
            min_runners=options.min_runners,
            max_runners=options.max_runners,
            labels=sorted(set(options.labels)),
            scaling_policy=options.scaling_policy,
        )
    )


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
    if options.scaling_policy is not None:
        config["scaling_policy"] = options.scaling_policy
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
