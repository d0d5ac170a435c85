"""Containers of the project's image run as real processes: the pod's environment, mounted
Secrets and ConfigMaps, the ServiceAccount's identity, exit codes, restarts, SIGTERM on deletion
and readiness from the probe. Containers of other images keep the simulated runtime.

The commands are `python -c ...` (a console script next to this interpreter, like
`gha-controller`), so each test controls what its process does.
"""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import TIMEOUT, wait_for

Obj = dict[str, Any]
NS = "procs"
IMAGE = "ghcr.io/example/gha-runner-scaler:0.1.0"


@pytest.fixture
async def kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(run_project_image=True, restart_backoff=0.05) as emulator:
        emulator.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield emulator


@pytest.fixture
async def api(kube: KubeEmulator) -> AsyncIterator[client.ApiClient]:
    async with client.ApiClient(await kube.configuration()) as api_client:
        yield api_client


def pod(name: str, script: str, *args: str, image: str = IMAGE, **spec: Any) -> Obj:
    container: Obj = {
        "name": "main",
        "image": image,
        "command": ["python", "-c", textwrap.dedent(script)],
        "args": list(args),
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [container], **spec},
    }


def current(kube: KubeEmulator, name: str) -> Obj | None:
    return kube.store.get(("", "pods"), NS, name)


def container_state(kube: KubeEmulator, name: str) -> Obj:
    obj = current(kube, name) or {}
    statuses = (obj.get("status") or {}).get("containerStatuses") or [{}]
    state: Obj = statuses[0].get("state") or {}
    return state


def phase(kube: KubeEmulator, name: str) -> str:
    return str(((current(kube, name) or {}).get("status") or {}).get("phase", ""))


REPORT = """
    import asyncio, os, sys
    from pathlib import Path
    from kubernetes_asyncio import client, watch
    from shared.kube.client import load_configuration

    async def main():
        async with client.ApiClient(await load_configuration()) as api:
            await client.CoreV1Api(api).create_namespaced_config_map(os.environ["NS"], {
                "metadata": {"name": "report"},
                "data": {
                    "password": Path(sys.argv[1]).read_text(),
                    "settings": Path(os.environ["SETTINGS"], "settings.json").read_text(),
                    "greeting": os.environ["GREETING"],
                    "namespace": Path(os.environ["SA_DIR"], "namespace").read_text(),
                    "host": os.environ["KUBERNETES_SERVICE_HOST"],
                },
            })
        return 3

    sys.exit(asyncio.run(main()))
"""


async def test_a_project_container_runs_as_its_service_account_with_its_mounts(
    kube: KubeEmulator, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(NS, {"metadata": {"name": "reporter"}})
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "report", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "report", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "report"},
            "subjects": [{"kind": "ServiceAccount", "name": "reporter", "namespace": NS}],
        }
    )
    await core.create_namespaced_secret(
        NS, {"metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}}
    )
    await core.create_namespaced_config_map(
        NS,
        {"metadata": {"name": "conf"}, "data": {"greeting": "hello", "settings.json": "{}"}},
    )
    body = pod(
        "reporter",
        REPORT,
        "/etc/creds/password",
        serviceAccountName="reporter",
        restartPolicy="Never",
        volumes=[
            {"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "conf", "configMap": {"name": "conf"}},
        ],
        container={
            "env": [
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "SETTINGS", "value": "/etc/conf"},
                {"name": "SA_DIR", "value": "/var/run/secrets/kubernetes.io/serviceaccount"},
            ],
            "envFrom": [{"configMapRef": {"name": "conf"}, "prefix": ""}],
            "volumeMounts": [
                {"name": "creds", "mountPath": "/etc/creds", "readOnly": True},
                {"name": "conf", "mountPath": "/etc/conf"},
            ],
        },
    )
    body["spec"]["containers"][0]["env"].append(
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "greeting"}}}
    )
    await core.create_namespaced_pod(NS, body)
    await wait_for(lambda: phase(kube, "reporter") == "Failed")
    assert container_state(kube, "reporter")["terminated"]["exitCode"] == 3
    report = await core.read_namespaced_config_map("report", NS)
    assert report.data == {
        "password": "s3cret",
        "settings": "{}",
        "greeting": "hello",
        "namespace": NS,
        "host": "127.0.0.1",
    }
    assert (
        kube.requests.count(
            verb="create", resource="configmaps", user=f"system:serviceaccount:{NS}:reporter"
        )
        == 1
    )


async def test_other_images_keep_the_simulated_runtime(
    kube: KubeEmulator, api: client.ApiClient
) -> None:
    await client.CoreV1Api(api).create_namespaced_pod(
        NS, pod("other", "import sys; sys.exit(5)", image="busybox:1", restartPolicy="Never")
    )
    await wait_for(lambda: "running" in container_state(kube, "other"))
    assert phase(kube, "other") == "Running"


async def test_a_failing_process_is_restarted_per_restart_policy(
    kube: KubeEmulator, api: client.ApiClient
) -> None:
    # The first run leaves a mark in its emptyDir and fails; the restart finds it and succeeds.
    script = """
        import sys
        from pathlib import Path
        mark = Path(sys.argv[1])
        if mark.exists():
            sys.exit(0)
        mark.write_text("ran")
        sys.exit(1)
    """
    await client.CoreV1Api(api).create_namespaced_pod(
        NS,
        pod(
            "flaky",
            script,
            "/scratch/mark",
            restartPolicy="OnFailure",
            volumes=[{"name": "scratch", "emptyDir": {}}],
            container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        ),
    )
    await wait_for(lambda: phase(kube, "flaky") == "Succeeded")
    status = (current(kube, "flaky") or {})["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["state"]["terminated"]["exitCode"] == 0


async def test_a_missing_command_exits_127(kube: KubeEmulator, api: client.ApiClient) -> None:
    body = pod("nothing", "", restartPolicy="Never")
    body["spec"]["containers"][0]["command"] = ["gha-no-such-command"]
    await client.CoreV1Api(api).create_namespaced_pod(NS, body)
    await wait_for(lambda: phase(kube, "nothing") == "Failed")
    assert container_state(kube, "nothing")["terminated"]["exitCode"] == 127


async def final_exit_code(api: client.ApiClient, name: str) -> int:
    """Delete the pod and return its container's exit code from the last watch event that had
    it (the kubelet writes the termination, then the pod is removed)."""
    core = client.CoreV1Api(api)
    listed = await core.list_namespaced_pod(NS, field_selector=f"metadata.name={name}")
    await core.delete_namespaced_pod(name, NS)
    codes = []
    w = watch.Watch()
    async with (
        asyncio.timeout(TIMEOUT),
        w.stream(
            core.list_namespaced_pod,
            NS,
            field_selector=f"metadata.name={name}",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=TIMEOUT,
        ) as stream,
    ):
        async for ev in stream:
            codes += [
                cs["state"]["terminated"]["exitCode"]
                for cs in (ev["raw_object"].get("status") or {}).get("containerStatuses") or []
                if "terminated" in (cs.get("state") or {})
            ]
            if ev["type"] == "DELETED":
                break
    assert codes
    return int(codes[-1])


TERM_AWARE = """
    import signal, sys, time
    from pathlib import Path
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
    Path(sys.argv[1]).write_text("up")
    while True:
        time.sleep(1)
"""


async def test_deleting_a_pod_sends_sigterm(kube: KubeEmulator, api: client.ApiClient) -> None:
    await client.CoreV1Api(api).create_namespaced_pod(
        NS,
        pod(
            "graceful",
            TERM_AWARE,
            "/scratch/up",
            volumes=[{"name": "scratch", "emptyDir": {}}],
            container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        ),
    )
    obj = await wait_for(lambda: current(kube, "graceful"))
    assert kube.processes is not None
    up = kube.processes.pod_dir(obj) / "root" / "scratch" / "up"
    await wait_for(up.exists)
    assert await final_exit_code(api, "graceful") == 7


async def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    kube: KubeEmulator, api: client.ApiClient
) -> None:
    script = TERM_AWARE.replace("lambda *_: sys.exit(7)", "signal.SIG_IGN")
    await client.CoreV1Api(api).create_namespaced_pod(
        NS,
        pod(
            "stubborn",
            script,
            "/scratch/up",
            terminationGracePeriodSeconds=1,
            volumes=[{"name": "scratch", "emptyDir": {}}],
            container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        ),
    )
    obj = await wait_for(lambda: current(kube, "stubborn"))
    assert kube.processes is not None
    await wait_for((kube.processes.pod_dir(obj) / "root" / "scratch" / "up").exists)
    assert await final_exit_code(api, "stubborn") == 137


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_readiness_follows_the_http_probe(kube: KubeEmulator, api: client.ApiClient) -> None:
    # The server starts only once the test drops a file, so "running but not ready" is certain.
    port = free_port()
    script = f"""
        import http.server, sys, time
        from pathlib import Path
        go = Path(sys.argv[1])
        while not go.exists():
            time.sleep(0.05)
        http.server.HTTPServer(("", {port}), http.server.SimpleHTTPRequestHandler).serve_forever()
    """
    await client.CoreV1Api(api).create_namespaced_pod(
        NS,
        pod(
            "probed",
            script,
            "/scratch/go",
            volumes=[{"name": "scratch", "emptyDir": {}}],
            container={
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                "ports": [{"name": "http", "containerPort": port}],
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
            },
        ),
    )
    await wait_for(lambda: "running" in container_state(kube, "probed"))
    obj = current(kube, "probed")
    assert obj is not None
    ready = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert (ready["Ready"], obj["status"]["containerStatuses"][0]["ready"]) == ("False", False)
    assert kube.processes is not None
    (kube.processes.pod_dir(obj) / "root" / "scratch" / "go").write_text("go")

    def is_ready() -> bool:
        pod_now = current(kube, "probed") or {}
        return any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod_now.get("status") or {}).get("conditions") or []
        )

    await wait_for(is_ready)
    assert json.dumps(current(kube, "probed")).count('"ready": true') == 1


async def test_pod_logs_show_the_process_output(kube: KubeEmulator, api: client.ApiClient) -> None:
    script = """
        import sys, time
        from pathlib import Path
        print("first line", flush=True)
        print("second line", flush=True)
        Path(sys.argv[1]).write_text("up")
        while True:
            time.sleep(1)
    """
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(
        NS,
        pod(
            "talker",
            script,
            "/scratch/up",
            volumes=[{"name": "scratch", "emptyDir": {}}],
            container={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        ),
    )
    obj = await wait_for(lambda: current(kube, "talker"))
    assert kube.processes is not None
    await wait_for((kube.processes.pod_dir(obj) / "root" / "scratch" / "up").exists)
    assert await core.read_namespaced_pod_log("talker", NS) == "first line\nsecond line\n"
    assert await core.read_namespaced_pod_log("talker", NS, tail_lines=1) == "second line\n"
