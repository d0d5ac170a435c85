"""A rig for the runner reconcilers: the Kubernetes emulator (with its kubelet) and the Actions
emulator on loopback, a runtime Manager running the two controllers over real HTTP, and helpers
that play the listener's part (ERS patches, JobStarted status patches)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from controller import app
from controller.app import COMPONENT
from controller.deps import Deps
from controller.github.clients import ActionsClients
from controller.runtime import Backoff, Manager, RuntimeSettings, WatchSettings
from controller.settings import AutoscalingSettings, ListenerSettings, RunnerSettings
from sandbox.actions.emulator import ActionsEmulator
from sandbox.demo.cluster import (
    CONTROLLER_RBAC,
    LISTENER_RBAC,
    RUNNER_NAMESPACE_RBAC,
    RegistrationDelay,
)
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.kubelet import ContainerRuntime
from sandbox.kube.status import ApiError
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import Credentials
from shared.actions.transport import ProxySettings, RetryPolicy
from shared.api.kinds import AUTOSCALING_LISTENER, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.clock import Clock
from shared.kube.client import new_api_client, user_agent
from shared.kube.errors import NotFound
from shared.kube.objects import POD, ROLE_BINDING, SECRET, Kind, Objects
from shared.typedefs import JSONDict

FAST = RunnerSettings(
    pod_failure_backoff_seconds=0.02,
    pod_failure_backoff_max_seconds=0.32,
    failed_runner_replace_delay_seconds=0.2,
    failed_runner_replace_delay_max_seconds=1.0,
    job_still_running_retry_seconds=0.1,
    quota_retry_seconds=0.1,
)
DEADLINE = 10.0
TEST_USER = "test-listener"
# As the Helm chart renders it: a runner pod is never restarted in place.
DEFAULT_TEMPLATE: JSONDict = {
    "restartPolicy": "Never",
    "containers": [{"name": "runner", "image": "runner:latest"}],
}
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"
"""The controller's namespace as manifests/ install it (its RBAC binds the ServiceAccount
there)."""
CONTROLLER_USER = f"system:serviceaccount:{CONTROLLER_NAMESPACE}:gha-controller"
"""The controller's identity: the ServiceAccount of manifests/, with exactly its RBAC."""
LISTENER_IMAGE = "ghcr.io/gha-runner-scaler/gha-runner-scaler:test"
IN_CLUSTER = ("autoscalingrunnerset", "autoscalinglistener")
FAST_LISTENER = ListenerSettings(
    restart_backoff_seconds=0.05, restart_backoff_max_seconds=0.4, stable_seconds=0.5
)


def test_factory(
    config_url: str,
    credentials: Credentials,
    *,
    proxy: ProxySettings | None,
    root_ca_pem: str | None,
) -> ActionsClient:
    return ActionsClient(
        config_url=config_url,
        credentials=credentials,
        proxy=proxy or ProxySettings(),
        root_ca_pem=root_ca_pem,
        retry=RetryPolicy(attempts=2, wait_min=0.01, wait_max=0.02),
        env={},
    )


def metric(text: str, metric_name: str, /, **labels: str) -> float:
    """The sum of a Prometheus text metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(metric_name):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if match is None or match.group(1) != metric_name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match.group(3))
    return total


@dataclass
class Rig:
    kube: KubeEmulator
    gh: ActionsEmulator
    objects: Objects
    namespace: str
    scale_set_id: int
    config_url: str
    manager: Manager
    deps: Deps
    system_namespace: str
    """The controller's namespace: listeners, their pods, ServiceAccounts and Secrets."""
    _patch_ids: list[int] = field(default_factory=lambda: [0])
    _apis: list[client.ApiClient] = field(default_factory=list)

    async def as_listener(self, runner_set: str) -> Objects:
        """A client with the listener's identity and RBAC for `runner_set`: in-cluster, the
        ServiceAccount the controller made for the AutoscalingListener that drives the set (with
        the Role the controller made); docker-run, `gha-listener` of manifests/listener/ with
        its Role's `resourceNames` set to `runner_set`, as docs/listener.md says to."""

        async def listener() -> JSONDict | None:
            items: list[JSONDict] = (
                await self.objects.list(AUTOSCALING_LISTENER, self.system_namespace)
            )["items"]
            for item in items:
                if (item.get("spec") or {}).get("ephemeralRunnerSetName") == runner_set:
                    return item
            return None

        if "autoscalinglistener" in {c.name for c in self.manager.controllers}:
            name = (await self.until(listener, what="the listener"))["metadata"]["name"]

            await self.until(
                lambda: self.exists(ROLE_BINDING, self.namespace, name),
                what="the listener's RoleBinding",
            )
            token = self.kube.service_account_token(self.system_namespace, name)
        else:
            for doc in yaml.safe_load_all(LISTENER_RBAC.read_text()):
                doc["metadata"]["namespace"] = self.namespace
                for rule in doc.get("rules") or []:
                    if "resourceNames" in rule:
                        rule["resourceNames"] = [runner_set]
                for subject in doc.get("subjects") or []:
                    subject["namespace"] = self.namespace
                with contextlib.suppress(ApiError):  # one per namespace
                    self.kube.apply(doc)
            token = self.kube.service_account_token(self.namespace, "gha-listener")
        api = client.ApiClient(await self.kube.configuration(token=token))
        self._apis.append(api)
        return Objects(api)

    # --- reading ---------------------------------------------------------------------------

    async def exists(self, kind: Kind, namespace: str | None, name: str) -> bool:
        try:
            await self.objects.get(kind, namespace, name)
        except NotFound:
            return False
        return True

    async def runners(self) -> list[JSONDict]:
        listing = await self.objects.list(EPHEMERAL_RUNNER, self.namespace)
        return list(listing.get("items") or [])

    async def live_runners(self) -> list[JSONDict]:
        return [r for r in await self.runners() if not r["metadata"].get("deletionTimestamp")]

    async def runner(self, name: str) -> JSONDict | None:
        try:
            return await self.objects.get(EPHEMERAL_RUNNER, self.namespace, name)
        except NotFound:
            return None

    async def runner_set(self, name: str = "arc") -> JSONDict:
        return await self.objects.get(EPHEMERAL_RUNNER_SET, self.namespace, name)

    async def pod(self, name: str) -> JSONDict | None:
        try:
            return await self.objects.get(POD, self.namespace, name)
        except NotFound:
            return None

    async def secret(self, name: str) -> JSONDict | None:
        try:
            return await self.objects.get(SECRET, self.namespace, name)
        except NotFound:
            return None

    def metrics(self) -> str:
        return self.manager.metrics.render().decode()

    def controller_requests(self) -> dict[str, int]:
        """The controller's requests other than its informers' lists and watches, by
        `verb resource[/subresource]`."""
        counts: dict[str, int] = {}
        for r in self.kube.requests.log:
            if r.user != CONTROLLER_USER or r.verb in ("list", "watch"):
                continue
            key = (
                f"{r.verb} {r.resource}/{r.subresource}"
                if r.subresource
                else (f"{r.verb} {r.resource}")
            )
            counts[key] = counts.get(key, 0) + 1
        return counts

    def reconciles(self, controller: str) -> float:
        return metric(self.metrics(), "controller_runtime_reconcile_total", controller=controller)

    def wakes(self, controller: str, *, fields: bool = True) -> Counter[str]:
        """What woke `controller`, by `watch event fields` (docs/controller-runtime.md#wakes),
        or `watch event` without `fields`, with `requeue` for scheduled adds that fell due."""
        text = self.metrics()
        causes: Counter[str] = Counter()
        for line in text.splitlines():
            match = re.match(r"^gha_runtime_wakes_total\{([^}]*)\}\s+(\S+)$", line)
            if match is None:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if have["controller"] == controller and float(match.group(2)):
                named = (have["watch"], have["event"], have["fields"] if fields else "")
                cause = " ".join(filter(None, named))
                causes[cause] += int(float(match.group(2)))
        requeues = metric(text, "gha_runtime_requeues_total", name=controller)
        if requeues:
            causes["requeue"] += int(requeues)
        return causes

    # --- waiting ---------------------------------------------------------------------------

    async def until(
        self, probe: Callable[[], Awaitable[Any]], *, within: float = DEADLINE, what: str = ""
    ) -> Any:
        """Poll `probe` until it returns something truthy; fail after `within` seconds."""
        deadline = time.monotonic() + within
        last: Any = None
        while time.monotonic() < deadline:
            last = await probe()
            if last:
                return last
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what or probe}: last {last!r}")

    async def count_runners(self, n: int, *, live: bool = True) -> list[JSONDict]:
        async def probe() -> list[JSONDict] | None:
            found = await (self.live_runners() if live else self.runners())
            return found if len(found) == n else None

        result: list[JSONDict] = await self.until(probe, what=f"{n} runners")
        return result

    async def registered(self, n: int) -> list[JSONDict]:
        async def probe() -> list[JSONDict] | None:
            found = await self.live_runners()
            ok = len(found) == n and all((r.get("status") or {}).get("runnerId") for r in found)
            return found if ok else None

        result: list[JSONDict] = await self.until(probe, what=f"{n} registered runners")
        return result

    async def settle(self, *, delayed: bool = False, deferred: bool = False) -> None:
        """Wait until every controller queue is empty and no worker is inside a reconcile; with
        `delayed`, also until no key is scheduled for later (a requeue_after still to fire);
        with `deferred`, until no deferred wake is (docs/controller-runtime.md#deferred-wakes)."""

        def idle() -> bool:
            text = self.metrics()
            return (
                metric(text, "workqueue_depth") == 0
                and metric(text, "controller_runtime_active_workers") == 0
                and not (delayed and any(c.queue.waiting for c in self.manager.controllers))
                and not (deferred and any(c.queue.deferred for c in self.manager.controllers))
            )

        stable = 0
        deadline = time.monotonic() + DEADLINE
        while stable < 5:
            if time.monotonic() > deadline:
                raise AssertionError("controllers did not settle")
            stable = stable + 1 if idle() else 0
            await asyncio.sleep(0.02)

    # --- writing (the listener's and the user's part) --------------------------------------

    async def create_runner_set(
        self,
        *,
        name: str = "arc",
        replicas: int = 0,
        patch_id: int = 0,
        template: JSONDict | None = None,
        proxy: JSONDict | None = None,
        metadata: JSONDict | None = None,
    ) -> JSONDict:
        runner_spec = self.runner_spec(template)
        if proxy is not None:
            runner_spec["proxy"] = proxy
        body: JSONDict = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    "actions.github.com/scale-set-name": name,
                    "actions.github.com/scale-set-namespace": self.namespace,
                },
                **(metadata or {}),
            },
            "spec": {"replicas": replicas, "patchID": patch_id, "ephemeralRunnerSpec": runner_spec},
        }
        return await self.objects.create(EPHEMERAL_RUNNER_SET, self.namespace, body)

    def runner_spec(self, template: JSONDict | None = None, **extra: Any) -> JSONDict:
        return {
            "githubConfigUrl": self.config_url,
            "githubConfigSecret": "github-secret",
            "runnerScaleSetId": self.scale_set_id,
            "spec": template or DEFAULT_TEMPLATE,
            **extra,
        }

    async def create_runner(
        self, *, template: JSONDict | None = None, name: str = "", **extra: Any
    ) -> JSONDict:
        """An EphemeralRunner without a set (as ARC's EphemeralRunner tests make them)."""
        body: JSONDict = {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunner",
            "metadata": {
                **({"name": name} if name else {"generateName": "runner-"}),
                "namespace": self.namespace,
                "finalizers": [
                    "ephemeralrunner.actions.github.com/finalizer",
                    "ephemeralrunner.actions.github.com/runner-registration-finalizer",
                ],
            },
            "spec": self.runner_spec(template, **extra),
        }
        return await self.objects.create(EPHEMERAL_RUNNER, self.namespace, body)

    async def scale(self, replicas: int, patch_id: int, *, name: str = "arc") -> None:
        """What the listener sends (docs/reconcilers.md#the-patch-id-protocol)."""
        await self.objects.patch(
            EPHEMERAL_RUNNER_SET,
            self.namespace,
            name,
            {"spec": {"replicas": replicas or None, "patchID": patch_id}},
        )

    async def patch_spec(self, patch: JSONDict, *, name: str = "arc") -> None:
        await self.objects.patch(EPHEMERAL_RUNNER_SET, self.namespace, name, {"spec": patch})

    async def set_status(self, runner: str, **status: Any) -> JSONDict:
        return await self.objects.patch(
            EPHEMERAL_RUNNER, self.namespace, runner, {"status": status}, status=True
        )

    async def job_started(self, runner: JSONDict, *, job: str = "job-1") -> JSONDict:
        """The listener's JobStarted patch: phase Running with the job fields; the service side
        gets the job assigned so it refuses to remove the runner."""
        rid = runner["status"]["runnerId"]
        self.gh.state.runners[rid].job_id = 4242
        return await self.set_status(
            runner["metadata"]["name"],
            phase="Running",
            jobId=job,
            jobRequestId=4242,
            jobRepositoryName="owner/repo",
            workflowRunId=9001,
            jobWorkflowRef="owner/repo/.github/workflows/ci.yaml@refs/heads/main",
            jobDisplayName="build",
        )

    async def start_one_job(self) -> tuple[str, int]:
        """Scale to one runner, let the emulator assign it a real job once its simulated runner
        is online, and promote it as the listener would; the runner's name and the job."""
        await self.scale(1, 1)
        [runner] = await self.registered(1)
        name = runner["metadata"]["name"]
        rid = runner["status"]["runnerId"]

        async def online() -> bool:
            found = self.gh.state.runners.get(rid)
            return found is not None and found.online

        await self.until(online, what="simulated runner online")
        job = self.gh.enqueue_job(labels=["arc"], duration=30)

        async def assigned() -> bool:
            found = self.gh.state.runners.get(rid)
            return found is not None and found.job_id == job

        await self.until(assigned, what="job assigned")
        await self.set_status(name, phase="Running", jobId="job-1", jobRequestId=job)
        return name, job

    def job_finished(self, runner: JSONDict) -> None:
        rid = runner["status"]["runnerId"]
        if rid in self.gh.state.runners:
            self.gh.state.runners[rid].job_id = None

    async def pod_status(self, name: str, status: JSONDict) -> JSONDict:
        """Overwrite a pod's status the way a kubelet does (tests without a kubelet)."""
        return await self.objects.patch(POD, self.namespace, name, {"status": status}, status=True)

    async def strip_finalizers(self) -> None:
        for runner in await self.runners():
            if runner["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(NotFound):
                    await self.objects.patch(
                        EPHEMERAL_RUNNER,
                        self.namespace,
                        runner["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                    )


@dataclass(frozen=True)
class RigOptions:
    controllers: tuple[str, ...] = ("ephemeralrunner", "ephemeralrunnerset")
    kubelet: bool = True
    simulated_runners: bool = False
    """Runner containers run as the Actions emulator's simulated runners (else they idle)."""
    runtime: ContainerRuntime | None = None
    settings: RunnerSettings = FAST
    tls: bool = False
    """The emulator serves TLS (kubectl sends its bearer token only over TLS)."""
    listener: ListenerSettings = FAST_LISTENER
    pod_start_latency: float = 0.0
    """How long the kubelet takes from a pod's first sync to its sandbox being up."""
    registration_latency: float = 0.0
    """How long a simulated runner takes from its container's start to connecting."""
    cluster_role: bool = True
    """The default install (a ClusterRole for the informers, watching every namespace); False
    installs as manifests/without-cluster-role/ does, the controller watching only the two
    namespaces."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    clock: Clock | None = None
    """The informers' clock (their backoffs); None for real time."""
    bookmark_interval: float = 60.0
    """How often the emulator sends a bookmark on a watch that asks for them."""
    nodes: int = 1
    """The emulator's worker nodes (a drain needs another node for the pods it evicts)."""
    urgent_workers: int | None = None
    """Workers kept for the urgent lane (docs/controller-runtime.md#the-urgent-lane); None
    for the default."""


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions()


@pytest.fixture
async def rig(
    rig_options: RigOptions, namespace: str, actions: ActionsEmulator
) -> AsyncIterator[Rig]:
    async with open_rig(rig_options, namespace=namespace, actions=actions) as opened:
        yield opened


def install_rbac(kube: KubeEmulator, namespace: str, *, cluster_role: bool) -> None:
    """The controller's namespace, ServiceAccount and RBAC from manifests/ (without the
    ClusterRole as manifests/without-cluster-role/ drops it), the runner namespace with the
    runner-namespace component."""
    for path in CONTROLLER_RBAC:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and (
                cluster_role
                or doc["metadata"]["name"] != "gha-controller"
                or not doc["kind"].startswith("Cluster")
            ):
                kube.apply(doc)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for doc in yaml.safe_load_all(RUNNER_NAMESPACE_RBAC.read_text()):
        if doc:
            doc["metadata"]["namespace"] = namespace
            kube.apply(doc)


@contextlib.asynccontextmanager
async def open_rig(
    rig_options: RigOptions,
    *,
    namespace: str,
    actions: ActionsEmulator,
    kube: KubeEmulator | None = None,
    scale_set_id: int | None = None,
) -> AsyncIterator[Rig]:
    """A controller over a new emulator, or over `kube` as an earlier rig left it (a controller
    stopped and another started on the same cluster: `scale_set_id` is that rig's)."""
    if kube is not None:
        assert scale_set_id is not None
        async with _running(rig_options, kube, namespace, actions, scale_set_id) as rig:
            yield rig
        return
    runtime = rig_options.runtime
    if rig_options.simulated_runners:
        runtime = actions.runtime
        if rig_options.registration_latency:
            runtime = RegistrationDelay(actions.runtime, rig_options.registration_latency)
    async with KubeEmulator(
        container_runtime=runtime,
        kubelet=rig_options.kubelet,
        restart_backoff=0.01,
        tls=rig_options.tls,
        pod_start_latency=rig_options.pod_start_latency,
        bookmark_interval=rig_options.bookmark_interval,
        nodes=rig_options.nodes,
    ) as kube:
        kube.apply_crds(project_crds())
        install_rbac(kube, namespace, cluster_role=rig_options.cluster_role)
        token = actions.add_pat()
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "github-secret", "namespace": namespace},
                "data": {"github_token": base64.b64encode(token.encode()).decode()},
            }
        )
        scale_set = actions.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        async with _running(rig_options, kube, namespace, actions, scale_set.id) as rig:
            yield rig


@contextlib.asynccontextmanager
async def _running(
    rig_options: RigOptions,
    kube: KubeEmulator,
    namespace: str,
    actions: ActionsEmulator,
    scale_set_id: int,
) -> AsyncIterator[Rig]:
    """The controller's manager, running over `kube` until the block ends."""
    system = CONTROLLER_NAMESPACE
    # The controller runs as manifests/ install it (its ServiceAccount, its RBAC), with the
    # client gha-controller makes (its User-Agent included).
    api = new_api_client(
        await kube.configuration(
            token=kube.service_account_token(CONTROLLER_NAMESPACE, "gha-controller")
        ),
        user_agent=user_agent(COMPONENT),
    )
    # The test's own writes go out as another user, so the controller's requests can be
    # counted apart. It is an admin because it plays several parts at once: the user's kubectl,
    # the kubelet (pod status) and, in the tests of the reconcilers' own rules, the listener;
    # the tests of deletion paths, where a permission lost on the way must show, write the
    # listener's part with the listener's identity and Role (`Rig.as_listener`).
    test_api = client.ApiClient(
        await kube.configuration(token=kube.user_token(TEST_USER, ["system:masters"]))
    )
    runtime = RuntimeSettings(
        namespaces=None if rig_options.cluster_role else frozenset({namespace, system}),
        backoff=Backoff(base=0.01, maximum=0.5),
        watch=rig_options.watch,
        drain_timeout=2.0,
    )
    if rig_options.urgent_workers is not None:
        runtime = dataclasses.replace(runtime, urgent_workers=rig_options.urgent_workers)
    manager = Manager(api=api, settings=runtime, clock=rig_options.clock)
    # Wired by the composition root (controller/app.py), with the rig's settings and clients;
    # the runner-namespace controller runs whatever else does, as in gha-controller.
    deps = app.compose(
        manager,
        rig_options.settings,
        autoscaling=AutoscalingSettings(controller_namespace=system, listener_image=LISTENER_IMAGE),
        listener=dataclasses.replace(rig_options.listener, controller_namespace=system),
        clients=ActionsClients(
            objects=manager.objects,
            factory=test_factory,
            credentials_ttl=rig_options.settings.credentials_ttl_seconds,
        ),
        only={*rig_options.controllers, "runnernamespace"},
    )
    task = asyncio.create_task(manager.run())
    rig = Rig(
        kube=kube,
        gh=actions,
        objects=Objects(test_api),
        namespace=namespace,
        scale_set_id=scale_set_id,
        config_url=actions.config_url("owner", "repo"),
        manager=manager,
        deps=deps,
        system_namespace=system,
    )
    try:
        await asyncio.wait_for(manager.wait_synced(), DEADLINE)
        yield rig
    finally:
        manager.stop()
        await asyncio.wait_for(task, DEADLINE)
        for listener_api in rig._apis:
            await listener_api.close()
        await deps.clients.aclose()
        await api.close()
        await test_api.close()
