"""`--metrics-auth`: /metrics only for a bearer token whose user RBAC lets `get /metrics`, asked
of the API server with a TokenReview and a SubjectAccessReview as controller-runtime does, with
its cache times (docs/security.md#metrics). Over HTTP, against the Kubernetes emulator with the
manifests applied by kubectl."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from controller.runtime import Manager, RuntimeSettings
from controller.runtime.health import metrics_routes, serve
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from shared.kube.client import new_api_client
from shared.kube.objects import POD, SECRET, Objects
from shared.metricsauth import ALLOW_TTL, DENY_TTL, TOKEN_TTL, MetricsAuth
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import RUNNERS, Cluster, example_set, listener_of
from tests.controller.test_process import (
    CONTROLLER,
    ROOT,
    SYSTEM,
    _install,
    doc_kustomization,
    free_port,
)

MONITORING = "monitoring"
READER = "prometheus-k8s"
"""The ServiceAccount manifests/examples/metrics-auth/ binds to the metrics-reader ClusterRole."""
COMPONENT_RBAC = ROOT / "manifests" / "metrics-auth" / "rbac.yaml"
READER_RBAC = ROOT / "manifests" / "examples" / "metrics-auth" / "metrics-reader.yaml"
READER_ROLE = "gha-runner-scaler-metrics-reader"
"""The example's ClusterRole, and its ClusterRoleBinding's name."""


@pytest.fixture
def metrics_auth_install(tmp_path: Path) -> Path:
    """docs/security.md's kustomization for authenticated metrics."""
    return doc_kustomization(tmp_path, "security.md", "## Metrics")


def service_accounts(kube: KubeEmulator, *names: str) -> dict[str, str]:
    """ServiceAccounts in the monitoring namespace, and a token of each."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MONITORING}})
    tokens = {}
    for name in names:
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": MONITORING},
            }
        )
        tokens[name] = kube.service_account_token(MONITORING, name)
    return tokens


async def spawn_controller(kubeconfig: Path, port: int, *args: str) -> asyncio.subprocess.Process:
    """`gha-controller` as the kubeconfig's identity, metrics and probes on `port`."""
    return await asyncio.create_subprocess_exec(
        str(CONTROLLER),
        "--kubeconfig",
        str(kubeconfig),
        "--no-leader-elect",
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--health-port",
        str(port),
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


@contextlib.asynccontextmanager
async def gha_controller(kubeconfig: Path, *args: str) -> AsyncIterator[str]:
    """The process as its ServiceAccount; its base URL, once /healthz answers (without a
    token). On exit SIGTERM, and it must exit 0."""
    port = free_port()
    process = await spawn_controller(kubeconfig, port, *args)
    base = f"http://127.0.0.1:{port}"
    try:
        while (await get(f"{base}/healthz"))[0] != 200:
            assert process.returncode is None
            await asyncio.sleep(0.05)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, stderr.decode()[-2000:]


async def get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
            return response.status, await response.text()
    except aiohttp.ClientConnectionError:
        return 0, ""


async def test_gha_controller_serves_metrics_only_to_the_metrics_reader(
    tmp_path: Path, actions: ActionsEmulator, metrics_auth_install: Path
) -> None:
    async with KubeEmulator(tls=True) as kube:
        kubeconfig = await _install(kube, tmp_path, metrics_auth_install, actions)
        tokens = service_accounts(kube, READER, "someone-else")
        async with gha_controller(kubeconfig, f"--{component_flag()}") as base:
            assert await get(f"{base}/metrics") == (401, "Unauthorized\n")
            assert await get(f"{base}/metrics", "not-a-token") == (401, "Unauthorized\n")
            status, text = await get(f"{base}/metrics", tokens["someone-else"])
            assert (status, text.strip()) == (
                403,
                f"Authorization denied for user system:serviceaccount:{MONITORING}:someone-else",
            )
            status, text = await get(f"{base}/metrics", tokens[READER])
            assert status == 200
            assert "controller_runtime_reconcile_total" in text
            assert (await get(f"{base}/readyz"))[0] == 200


def component_flag() -> str:
    """The flag of the variable manifests/metrics-auth/ sets on the Deployment."""
    component = yaml.safe_load(
        (ROOT / "manifests" / "metrics-auth" / "kustomization.yaml").read_text()
    )
    (patch,) = yaml.safe_load(component["patches"][0]["patch"])
    assert patch["value"] == {"name": "GHA_CONTROLLER_METRICS_AUTH", "value": "true"}
    return "metrics-auth"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def cluster() -> AsyncIterator[KubeEmulator]:
    """The controller's ServiceAccount with the component's ClusterRole, the reader's binding."""
    async with KubeEmulator() as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "gha-controller", "namespace": SYSTEM},
            }
        )
        for path in (COMPONENT_RBAC, READER_RBAC):
            for doc in yaml.safe_load_all(path.read_text()):
                kube.apply(doc)
        yield kube


@contextlib.asynccontextmanager
async def served(kube: KubeEmulator, clock: Clock) -> AsyncIterator[str]:
    """The controller's /metrics route with MetricsAuth as its ServiceAccount, on `clock`."""
    api = new_api_client(
        await kube.configuration(token=kube.service_account_token(SYSTEM, "gha-controller")),
        user_agent="test",
    )
    manager = Manager(api=api, settings=RuntimeSettings())
    routes = metrics_routes(manager, auth=MetricsAuth(api, clock=clock))
    runner = await serve(routes, host="127.0.0.1", port=0)
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/metrics"
    finally:
        await runner.cleanup()
        await api.close()


def reviews(kube: KubeEmulator) -> dict[str, int]:
    counts = {"tokenreviews": 0, "subjectaccessreviews": 0}
    for request in kube.requests.log:
        if request.resource in counts and request.verb == "create":
            counts[request.resource] += 1
    return counts


async def delete_binding(kube: KubeEmulator, name: str) -> None:
    async with client.ApiClient(await kube.configuration()) as admin:
        await client.RbacAuthorizationV1Api(admin).delete_cluster_role_binding(name)


def bind_reader(kube: KubeEmulator, name: str) -> None:
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"reader-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": READER_ROLE,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": MONITORING}],
        }
    )


async def test_answers_are_cached_for_controller_runtimes_times(cluster: KubeEmulator) -> None:
    clock = Clock()
    tokens = service_accounts(cluster, READER, "someone-else")
    async with served(cluster, clock) as url:
        assert (await get(url, tokens[READER]))[0] == 200
        assert (await get(url, tokens["someone-else"]))[0] == 403
        assert (await get(url, "not-a-token"))[0] == 401
        assert reviews(cluster) == {"tokenreviews": 3, "subjectaccessreviews": 2}
        # The same answers from the caches: not one more review.
        assert (await get(url, tokens[READER]))[0] == 200
        assert (await get(url, tokens["someone-else"]))[0] == 403
        assert (await get(url, "not-a-token"))[0] == 401
        assert reviews(cluster) == {"tokenreviews": 3, "subjectaccessreviews": 2}

        # The reader's binding goes and someone else gets one. Past a denial's 30 s someone
        # else is asked about again and let in; the reader's allowance holds for its 5 minutes.
        await delete_binding(cluster, READER_ROLE)
        bind_reader(cluster, "someone-else")
        clock.now += DENY_TTL + 1
        assert (await get(url, tokens["someone-else"]))[0] == 200
        assert (await get(url, tokens[READER]))[0] == 200
        assert reviews(cluster) == {"tokenreviews": 3, "subjectaccessreviews": 3}
        # Past 5 minutes (and the tokens' minute): both reviews again, and the reader is out.
        clock.now += ALLOW_TTL - DENY_TTL
        assert TOKEN_TTL < ALLOW_TTL - DENY_TTL
        assert (await get(url, tokens[READER]))[0] == 403
        assert reviews(cluster) == {"tokenreviews": 4, "subjectaccessreviews": 4}


async def test_a_controller_not_allowed_to_review_answers_500_and_asks_again(
    cluster: KubeEmulator,
) -> None:
    """The option on without the component's binding: the API server refuses the TokenReview,
    the scrape gets 500, and the next scrape asks again (a failure is not cached)."""
    await delete_binding(cluster, "gha-controller-metrics-auth")
    tokens = service_accounts(cluster, READER)
    async with served(cluster, Clock()) as url:
        assert await get(url, tokens[READER]) == (500, "Authentication failed\n")
        assert (await get(url, tokens[READER]))[0] == 500
        assert reviews(cluster)["tokenreviews"] == 2


async def test_gha_controller_without_the_review_binding_exits_2_with_one_line(
    tmp_path: Path, actions: ActionsEmulator
) -> None:
    """`--metrics-auth` on an install without the component: every scrape would fail, so the
    process says what to bind at start instead of serving 500s."""
    async with KubeEmulator(tls=True) as kube:
        kubeconfig = await _install(kube, tmp_path, ROOT / "manifests", actions)
        process = await spawn_controller(kubeconfig, free_port(), "--metrics-auth")
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert stderr.decode().splitlines()[-1] == (
        "gha-controller: metrics auth is on, but this identity may not create "
        "tokenreviews.authentication.k8s.io or create subjectaccessreviews.authorization.k8s.io: "
        "bind the ClusterRole gha-controller-metrics-auth to it (manifests/metrics-auth/)"
    )


async def test_listener_pods_serve_metrics_only_to_the_metrics_reader(
    tmp_path: Path, actions: ActionsEmulator, metrics_auth_install: Path
) -> None:
    """The install of docs/security.md with the controller and the listener pod as real
    processes, each with its ServiceAccount's token: the controller writes `metrics_auth` into
    the listener's config, and the component's binding (the group of the controller namespace's
    ServiceAccounts) lets the listener's own ServiceAccount review its scrapers."""
    async with KubeEmulator(
        tls=True, run_project_image=True, container_runtime=actions.runtime, restart_backoff=0.1
    ) as kube:
        kubeconfig = tmp_path / "admin.kubeconfig"
        kube.write_kubeconfig(kubeconfig)
        async with client.ApiClient(await kube.configuration()) as api:
            cluster = Cluster(kube, actions, Objects(api), kubeconfig, [])
            await cluster.kubectl("apply", "-k", str(metrics_auth_install))
            await cluster.kubectl("create", "namespace", RUNNERS)
            await cluster.kubectl(
                "apply", "-k", str(ROOT / "manifests" / "examples" / "runner-namespace")
            )
            await cluster.kubectl(
                "-n", RUNNERS, "create", "secret", "generic", "github-config",
                f"--from-literal=github_token={actions.add_pat()}",
            )  # fmt: skip
            await cluster.kubectl(
                "apply", "-f", "-", stdin=example_set(actions.config_url("my-org"))
            )
            name = (await listener_of(cluster))["metadata"]["name"]

            async def listener_ready() -> JSONDict | None:
                pod = await cluster.get(POD, SYSTEM, name)
                conditions = ((pod or {}).get("status") or {}).get("conditions") or []
                ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
                return pod if ready else None

            pod = await cluster.until(listener_ready, what="the listener pod Ready")
            config = await cluster.get(SECRET, SYSTEM, f"{name}-config")
            assert config is not None
            assert json.loads(base64.b64decode(config["data"]["config.json"]))["metrics_auth"]

            tokens = service_accounts(kube, READER, "someone-else")
            assert kube.processes is not None
            url = f"http://{kube.processes.loopback_address(pod)}:8090/metrics"
            assert await get(url) == (401, "Unauthorized\n")
            status, text = await get(url, tokens["someone-else"])
            assert (status, text.strip()) == (
                403,
                f"Authorization denied for user system:serviceaccount:{MONITORING}:someone-else",
            )
            status, text = await get(url, tokens[READER])
            assert status == 200
            assert "gha_assigned_jobs" in text
            assert (await get(url.replace("/metrics", "/readyz")))[0] == 200
