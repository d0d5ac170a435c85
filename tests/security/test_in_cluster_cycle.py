"""A full in-cluster job cycle seen from the security side (docs/security.md): the real
controller and listener processes, each with its ServiceAccount's token and exactly the RBAC of
the manifests and of the Role the controller makes, run at debug level with known secrets (the
GitHub PAT or an App private key, the ServiceAccount tokens, the JIT configs the Actions
emulator hands out). Every output is then searched for them; the request log shows that neither
identity was refused."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import yaml

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.store import Event
from sandbox.kube.testing import PROJECT_ROOT
from shared.kube.objects import POD
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import (
    NAME,
    RUNNERS,
    SYSTEM,
    Cluster,
    example_set,
    listener_of,
)
from tests.sandbox.kube.test_kubectl import KUBECTL

SECRETS_KEY = ("", "secrets")
CONTROLLER_USER = f"system:serviceaccount:{SYSTEM}:gha-controller"
RUNNER_SECURITY = {"runAsNonRoot": True, "runAsUser": 1001}

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


SENSITIVE = ("token", "private_key", "credentials", "password")


def secret_values(key: str, value: str) -> Iterator[str]:
    """The values under a sensitive key of a Secret, and inside any value that is base64 or
    JSON (a JIT config is base64 of JSON whose values are base64 of JSON again) the values under
    sensitive keys: the runner's OAuth token, the listener config's github_token."""
    if len(value) >= 20 and any(word in key.lower() for word in SENSITIVE):
        yield value
    if not value:
        return
    try:
        decoded: Any = json.loads(value)
    except ValueError:
        try:
            decoded = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return
    if isinstance(decoded, str):
        yield from secret_values(key, decoded)
    elif isinstance(decoded, dict):
        for inner, item in decoded.items():
            yield from secret_values(
                str(inner), item if isinstance(item, str) else json.dumps(item)
            )


async def collect_secrets(kube: KubeEmulator, found: set[str]) -> None:
    subscription = kube.store.subscribe({SECRETS_KEY})
    try:
        while True:
            event = await subscription.queue.get()
            if not isinstance(event, Event):
                return
            for key, value in (event.obj.get("data") or {}).items():
                found.update(secret_values(key, base64.b64decode(value).decode(errors="replace")))
    finally:
        kube.store.unsubscribe(subscription)


async def install_at_debug(cluster: Cluster, credentials: str) -> list[str]:
    """The install of docs/install.md, both processes at debug level (the most they log), and
    the example set's runner pods given a securityContext (docs/security.md#pod-security)."""
    rendered = await cluster.kubectl("kustomize", str(PROJECT_ROOT / "manifests"))
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc["kind"] == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            container["env"] += [
                {"name": "GHA_CONTROLLER_LOG_LEVEL", "value": "debug"},
                {"name": "GHA_CONTROLLER_LISTENER_LOG_LEVEL", "value": "debug"},
            ]
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    await cluster.kubectl(
        "rollout", "status", "deployment/gha-controller", "-n", SYSTEM, "--timeout=60s"
    )
    await cluster.kubectl("create", "namespace", RUNNERS)
    await cluster.kubectl("apply", "-k", str(PROJECT_ROOT / "manifests/examples/runner-namespace"))
    if credentials == "pat":
        token = cluster.gh.add_pat()
        given = [token]
        literals = [f"--from-literal=github_token={token}"]
    else:
        app = cluster.gh.add_app()
        key = app.private_key_pem.strip()
        # A JSON log line would escape the key's newlines: its base64 lines are searched too.
        given = [key, *(line for line in key.splitlines() if not line.startswith("-----"))]
        literals = [
            f"--from-literal=github_app_id={app.app_id}",
            f"--from-literal=github_app_installation_id={app.installation_id}",
            f"--from-literal=github_app_private_key={key}",
        ]
    await cluster.kubectl("-n", RUNNERS, "create", "secret", "generic", "github-config", *literals)
    example = yaml.safe_load(example_set(cluster.gh.config_url("my-org")))
    example["spec"]["template"]["spec"]["securityContext"] = RUNNER_SECURITY
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(example))
    return given


async def metrics_of(cluster: Cluster, pod: JSONDict) -> str:
    processes = cluster.kube.processes
    assert processes is not None
    host = processes.loopback_address(pod)
    ports = [p["containerPort"] for p in pod["spec"]["containers"][0].get("ports") or []]
    port = next(p for p in ports if p != 8081)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{host}:{port}/metrics") as response,
    ):
        assert response.status == 200
        return await response.text()


@pytest.mark.parametrize("credentials", ["pat", "app"])
async def test_a_job_cycle_leaks_no_secret_and_meets_no_403(
    cluster: Cluster, credentials: str
) -> None:
    secrets: set[str] = set()
    collector = asyncio.create_task(collect_secrets(cluster.kube, secrets))
    given = await install_at_debug(cluster, credentials)
    listener = await listener_of(cluster)
    name = listener["metadata"]["name"]
    listener_user = f"system:serviceaccount:{SYSTEM}:{name}"

    runner_pods: list[JSONDict] = []

    async def listener_ready() -> JSONDict | None:
        pod = await cluster.get(POD, SYSTEM, name)
        conditions = ((pod or {}).get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        return pod if ready else None

    listener_pod = await cluster.until(listener_ready, what="the listener pod Ready")
    jobs = [cluster.gh.enqueue_job(labels=[NAME], duration=0.5) for _ in range(3)]

    async def runner_pods_seen() -> bool:
        runner_pods.extend((await cluster.objects.list(POD, RUNNERS))["items"])
        return bool(runner_pods)

    await cluster.until(runner_pods_seen, what="a runner pod")

    async def completed() -> bool:
        return all(cluster.gh.state.jobs[job].state == "completed" for job in jobs)

    await cluster.until(completed, what="three jobs completed")
    assert not collector.done(), collector
    collector.cancel()

    secrets.update(given)
    secrets.update(cluster.kube.tokens.by_token)
    jit_secrets = [s for s in secrets if s not in cluster.kube.tokens.by_token and s not in given]
    assert jit_secrets, secrets

    controller_pods = [
        p
        for p in (await cluster.objects.list(POD, SYSTEM))["items"]
        if p["metadata"]["name"].startswith("gha-controller-")
    ]
    assert len(controller_pods) == 2
    outputs: dict[str, str] = {}
    for pod in [*controller_pods, listener_pod]:
        pod_name = pod["metadata"]["name"]
        outputs[f"logs {pod_name}"] = await cluster.kubectl("-n", SYSTEM, "logs", pod_name)
        outputs[f"metrics {pod_name}"] = await metrics_of(cluster, pod)
    outputs["events"] = await cluster.kubectl("get", "events", "-A", "-o", "json")
    for key, bucket in cluster.kube.store.buckets.items():
        if key != SECRETS_KEY:
            outputs[f"stored {key}"] = json.dumps(list(bucket.objects.values()))
    assert "debug" in outputs[f"logs {name}"].lower(), "the listener logged at debug level"
    leaks = [(where, s[:6]) for where, text in outputs.items() for s in secrets if s in text]
    assert leaks == [], [(w, s) for w, text in outputs.items() for s in secrets if s in text]

    for user in (CONTROLLER_USER, listener_user):
        assert cluster.kube.requests.count(user=user) > 0
        refused = [r for r in cluster.kube.requests.log if r.user == user and r.code == 403]
        assert refused == [], user

    # Pod security: what the controller made (docs/security.md#pod-security).
    pod_context = listener_pod["spec"]["securityContext"]
    assert pod_context["runAsNonRoot"] is True
    for container in listener_pod["spec"]["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["runAsNonRoot"] is True
    for pod in runner_pods:
        assert pod["spec"]["securityContext"] == RUNNER_SECURITY
