"""The kubelet simulation: binding, status writes in the real order, runtime exit codes, env
resolution and graceful deletion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import events, wait_for

Obj = dict[str, Any]


class ScriptedRuntime:
    """Exits each container with the code scripted for its name; others run until deleted."""

    def __init__(self, codes: dict[str, int] | None = None) -> None:
        self.codes = codes or {}
        self.envs: dict[str, dict[str, str]] = {}
        self.runs: list[str] = []
        self.cancelled: list[str] = []

    async def run(self, *, pod: Obj, container: Obj, env: dict[str, str]) -> int:
        name = container["name"]
        self.envs[name] = env
        self.runs.append(name)
        code = self.codes.get(name)
        if name == "broken":
            raise RuntimeError("image not found")
        if code is not None:
            return code
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        return 0


@pytest.fixture
def runtime() -> ScriptedRuntime:
    return ScriptedRuntime({"ok": 0, "bad": 3, "init-ok": 0, "init-bad": 1})


@pytest.fixture
async def kubelet_kube(
    runtime: ScriptedRuntime, namespace: str
) -> AsyncIterator[tuple[KubeEmulator, client.CoreV1Api]]:
    async with KubeEmulator(container_runtime=runtime, restart_backoff=0) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        async with client.ApiClient(await kube.configuration()) as api:
            yield kube, client.CoreV1Api(api)


def pod(name: str, *containers: str, restart: str = "Never", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": restart,
            "containers": [{"name": c, "image": "busybox:1"} for c in containers],
            **spec,
        },
    }


def stored(kube: KubeEmulator, ns: str, name: str) -> Obj | None:
    return kube.store.get(("", "pods"), ns, name)


def phase(kube: KubeEmulator, ns: str, name: str) -> str | None:
    obj = stored(kube, ns, name)
    value = (obj or {}).get("status", {}).get("phase")
    return str(value) if value else None


async def test_pod_start_is_a_sequence_of_separate_status_writes(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api], namespace: str
) -> None:
    _, core = kubelet_kube
    created = await core.create_namespaced_pod(namespace, pod("p", "main"))
    assert created.status.phase == "Pending"
    seen = await events(
        core.list_namespaced_pod,
        namespace,
        resource_version=created.metadata.resource_version,
        count=4,
    )
    states = [e["object"] for e in seen]
    assert [e["type"] for e in seen] == ["MODIFIED"] * 4
    assert states[0]["spec"]["nodeName"] == "sandbox-node"
    assert [c["type"] for c in states[0]["status"]["conditions"]] == ["PodScheduled"]
    first = states[1]["status"]
    assert first["hostIP"] == "10.0.0.10"
    assert first["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert "podIP" not in first
    assert states[2]["status"]["podIP"].startswith("10.244.")
    running = states[3]["status"]
    assert running["phase"] == "Running"
    assert running["containerStatuses"][0]["ready"] is True
    assert "running" in running["containerStatuses"][0]["state"]
    ready = {c["type"]: c["status"] for c in running["conditions"]}
    assert ready["Ready"] == ready["ContainersReady"] == "True"
    rvs = [int(s["metadata"]["resourceVersion"]) for s in states]
    assert rvs == sorted(set(rvs))


@pytest.mark.parametrize(
    ("container", "want_phase", "code", "reason"),
    [("ok", "Succeeded", 0, "Completed"), ("bad", "Failed", 3, "Error")],
)
async def test_exit_code_decides_the_phase(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    namespace: str,
    container: str,
    want_phase: str,
    code: int,
    reason: str,
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_pod(namespace, pod("p", container))
    await wait_for(lambda: phase(kube, namespace, "p") == want_phase)
    got = await core.read_namespaced_pod("p", namespace)
    term = got.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (code, reason)
    assert got.status.container_statuses[0].ready is False


async def test_pod_fails_if_any_container_fails(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api], namespace: str
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_pod(namespace, pod("p", "ok", "bad"))
    await wait_for(lambda: phase(kube, namespace, "p") == "Failed")


async def test_environment_is_resolved_like_a_kubelet(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    runtime: ScriptedRuntime,
    namespace: str,
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}
    )
    await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "conf"}, "data": {"url": "https://x"}}
    )
    body = pod("p", "main")
    body["metadata"]["labels"] = {"app": "runner"}
    body["spec"]["containers"][0]["env"] = [
        {"name": "PLAIN", "value": "v"},
        {"name": "EXPANDED", "value": "$(PLAIN)-2"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "URL", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "url"}}},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {
            "name": "OPT",
            "valueFrom": {"secretKeyRef": {"name": "none", "key": "k", "optional": True}},
        },
    ]
    body["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "conf"}, "prefix": "CM_"}]
    created = await core.create_namespaced_pod(namespace, body)
    env = await wait_for(lambda: runtime.envs.get("main"))
    live = stored(kube, namespace, "p")
    assert live is not None
    assert env == {
        "CM_url": "https://x",
        "PLAIN": "v",
        "EXPANDED": "v-2",
        "TOKEN": "s3cret",
        "URL": "https://x",
        "NAME": "p",
        "NS": namespace,
        "UID": created.metadata.uid,
        "IP": live["status"]["podIP"],
        "APP": "runner",
    }


async def test_missing_secret_waits_in_create_container_config_error(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    runtime: ScriptedRuntime,
    namespace: str,
) -> None:
    kube, core = kubelet_kube
    body = pod("p", "main")
    body["spec"]["containers"][0]["env"] = [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "later", "key": "t"}}}
    ]
    await core.create_namespaced_pod(namespace, body)

    def waiting_reason() -> str | None:
        obj = stored(kube, namespace, "p") or {}
        statuses = obj.get("status", {}).get("containerStatuses") or [{}]
        reason = statuses[0].get("state", {}).get("waiting", {}).get("reason")
        return str(reason) if reason else None

    await wait_for(lambda: waiting_reason() == "CreateContainerConfigError")
    assert runtime.runs == []
    await core.create_namespaced_secret(
        namespace, {"metadata": {"name": "later"}, "stringData": {"t": "x"}}
    )
    await wait_for(lambda: phase(kube, namespace, "p") == "Running")
    assert runtime.envs["main"] == {"T": "x"}


async def test_graceful_deletion_stops_containers_then_removes_the_pod(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    runtime: ScriptedRuntime,
    namespace: str,
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_pod(namespace, pod("p", "main"))
    await wait_for(lambda: phase(kube, namespace, "p") == "Running")
    marked = await core.delete_namespaced_pod("p", namespace)
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.deletion_grace_period_seconds == 30
    seen = await events(
        core.list_namespaced_pod,
        namespace,
        resource_version=marked.metadata.resource_version,
        count=3,
    )
    # As a real kubelet reports it: the container terminated first, the phase still Running
    # (143, reason Error, no signal, for SIGTERM); the phase in a later write.
    assert [e["type"] for e in seen] == ["MODIFIED", "MODIFIED", "DELETED"]
    stopped, final = seen[0]["object"]["status"], seen[1]["object"]["status"]
    assert stopped["phase"] == "Running"
    assert stopped["containerStatuses"][0]["state"]["terminated"] == {
        "exitCode": 143,
        "reason": "Error",
        "startedAt": stopped["containerStatuses"][0]["state"]["terminated"]["startedAt"],
        "finishedAt": stopped["containerStatuses"][0]["state"]["terminated"]["finishedAt"],
        "containerID": stopped["containerStatuses"][0]["containerID"],
    }
    assert final["phase"] == "Failed"
    assert final["containerStatuses"] == stopped["containerStatuses"]
    assert runtime.cancelled == ["main"]


async def test_finalizer_holds_a_terminated_pod(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api], namespace: str
) -> None:
    kube, core = kubelet_kube
    body = pod("p", "main")
    body["metadata"]["finalizers"] = ["test.io/hold"]
    await core.create_namespaced_pod(namespace, body)
    await wait_for(lambda: phase(kube, namespace, "p") == "Running")
    await core.delete_namespaced_pod("p", namespace)
    await wait_for(lambda: phase(kube, namespace, "p") == "Failed")
    held = await core.read_namespaced_pod("p", namespace)
    assert held.metadata.deletion_grace_period_seconds == 0
    await core.patch_namespaced_pod(
        "p", namespace, [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    await wait_for(lambda: stored(kube, namespace, "p") is None)


async def test_unscheduled_pod_is_deleted_at_once(namespace: str) -> None:
    async with KubeEmulator(kubelet=False) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        async with client.ApiClient(await kube.configuration()) as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_pod(namespace, pod("p", "main"))
            gone = await core.delete_namespaced_pod("p", namespace)
            assert gone.metadata.deletion_timestamp is None
            assert stored(kube, namespace, "p") is None


async def test_start_latency_holds_pods_in_container_creating(
    runtime: ScriptedRuntime, namespace: str
) -> None:
    async with KubeEmulator(container_runtime=runtime, pod_start_latency=3600) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply(
            {
                **pod("p", "ok"),
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": namespace},
            }
        )
        await wait_for(lambda: (stored(kube, namespace, "p") or {}).get("status", {}).get("hostIP"))
        assert phase(kube, namespace, "p") == "Pending"
        assert runtime.runs == []


async def test_restart_policy_always_restarts_exited_containers(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api], namespace: str
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_pod(namespace, pod("p", "bad", restart="Always"))

    def restarts() -> int:
        statuses = (stored(kube, namespace, "p") or {}).get("status", {}).get(
            "containerStatuses"
        ) or [{}]
        return int(statuses[0].get("restartCount", 0))

    await wait_for(lambda: restarts() >= 2)
    assert phase(kube, namespace, "p") == "Running"


@pytest.mark.parametrize(("init", "want"), [("init-ok", "Succeeded"), ("init-bad", "Failed")])
async def test_init_containers_run_first(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    runtime: ScriptedRuntime,
    namespace: str,
    init: str,
    want: str,
) -> None:
    kube, core = kubelet_kube
    body = pod("p", "ok", initContainers=[{"name": init, "image": "busybox:1"}])
    await core.create_namespaced_pod(namespace, body)
    await wait_for(lambda: phase(kube, namespace, "p") == want)
    assert runtime.runs == ([init, "ok"] if want == "Succeeded" else [init])


async def test_node_is_registered_ready(core: client.CoreV1Api) -> None:
    nodes = await core.list_node()
    node = nodes.items[0]
    assert node.metadata.labels["kubernetes.io/os"] == node.status.node_info.operating_system
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready[0].status == "True"


async def test_stopping_the_emulator_cancels_running_containers(
    runtime: ScriptedRuntime, namespace: str
) -> None:
    async with KubeEmulator(container_runtime=runtime) as kube:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.apply(
            {
                **pod("p", "main"),
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": namespace},
            }
        )
        await wait_for(lambda: runtime.runs == ["main"])
    assert runtime.cancelled == ["main"]


async def test_runtime_exception_fails_the_container(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api], namespace: str
) -> None:
    kube, core = kubelet_kube
    await core.create_namespaced_pod(namespace, pod("p", "broken"))
    await wait_for(lambda: phase(kube, namespace, "p") == "Failed")
    got = await core.read_namespaced_pod("p", namespace)
    assert got.status.container_statuses[0].state.terminated.exit_code == 128


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "image", "want"),
    [
        # runAsNonRoot without a group: the image's uid, group 0 (what a real node did).
        ({"runAsNonRoot": True}, {}, "ghcr.io/x/gha-runner-scaler:v1", (10001, 0, [0])),
        (
            {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001},
            {},
            "ghcr.io/x/gha-runner-scaler:v1",
            (10001, 10001, [10001]),
        ),
        (
            {"runAsUser": 1000, "runAsGroup": 3, "supplementalGroups": [5]},
            {"runAsGroup": 7},
            "busybox:1",
            (1000, 7, [7, 5]),
        ),
        ({}, {}, "busybox:1", None),
    ],
    ids=["image-uid-group-0", "run-as-group", "container-over-pod", "unknown"],
)
async def test_a_running_container_reports_the_user_it_runs_as(
    kubelet_kube: tuple[KubeEmulator, client.CoreV1Api],
    namespace: str,
    pod_sc: Obj,
    container_sc: Obj,
    image: str,
    want: tuple[int, int, list[int]] | None,
) -> None:
    kube, _ = kubelet_kube
    body = pod("p", "main", securityContext=pod_sc)
    body["spec"]["containers"][0].update(image=image, securityContext=container_sc)
    body["metadata"]["namespace"] = namespace
    kube.apply({"apiVersion": "v1", "kind": "Pod", **body})
    await wait_for(lambda: phase(kube, namespace, "p") == "Running")
    obj = stored(kube, namespace, "p")
    assert obj is not None
    user = obj["status"]["containerStatuses"][0].get("user")
    if want is None:
        assert user is None
    else:
        uid, gid, groups = want
        assert user == {"linux": {"uid": uid, "gid": gid, "supplementalGroups": groups}}
