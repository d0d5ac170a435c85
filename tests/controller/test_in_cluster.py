"""The in-cluster mode as a user installs it: `kubectl apply -k manifests/`, the runner namespace
component, a GitHub Secret and the example AutoscalingRunnerSet. The Kubernetes emulator runs the
Deployment's `gha-controller` and the listener pod's `gha-listener` as real processes, each with
its ServiceAccount's token, so every permission they use comes from the manifests and from the
Role the controller made for the listener (docs/autoscaling.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from kubernetes_asyncio import client

from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.store import Event
from sandbox.kube.testing import PROJECT_ROOT
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from shared.kube.errors import NotFound
from shared.kube.objects import POD, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT, Kind, Objects
from shared.typedefs import JSONDict
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

SYSTEM = "gha-runner-scaler-system"
RUNNERS = "arc-runners"
NAME = "my-runners"
ER_KEY = ("actions.github.com", "ephemeralrunners")
DEADLINE = 60.0
T = TypeVar("T")


@dataclass
class Cluster:
    kube: KubeEmulator
    gh: ActionsEmulator
    objects: Objects
    kubeconfig: Path
    writes: list[tuple[str, str, str]]
    """(runner, phase written, by whom) for every change of a runner's phase."""

    async def kubectl(self, *args: str, stdin: str | None = None) -> str:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(self.kubeconfig),
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else None,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.kubeconfig.parent)},
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), 90
        )
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async def until(
        self, probe: Callable[[], Awaitable[T | None]], *, what: str, within: float = DEADLINE
    ) -> T:
        deadline = asyncio.get_running_loop().time() + within
        last: T | None = None
        while asyncio.get_running_loop().time() < deadline:
            last = await probe()
            if last:
                return last
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: last {last!r}")

    async def get(self, kind: Kind, namespace: str, name: str) -> JSONDict | None:
        try:
            return await self.objects.get(kind, namespace, name)
        except NotFound:
            return None


def example_set(config_url: str) -> str:
    """The example AutoscalingRunnerSet, pointed at the Actions emulator."""
    doc = yaml.safe_load(
        (PROJECT_ROOT / "manifests/examples/autoscalingrunnerset.yaml").read_text()
    )
    doc["spec"]["githubConfigUrl"] = config_url
    return yaml.safe_dump(doc)


async def record_phases(kube: KubeEmulator, writes: list[tuple[str, str, str]]) -> None:
    subscription = kube.store.subscribe({ER_KEY})
    try:
        while True:
            event = await subscription.queue.get()
            if not isinstance(event, Event):
                return
            phase = (event.obj.get("status") or {}).get("phase")
            before = ((event.old or {}).get("status") or {}).get("phase")
            if phase and phase != before:
                writes.append((event.obj["metadata"]["name"], str(phase), event.actor))
    finally:
        kube.store.unsubscribe(subscription)


@pytest.fixture
async def cluster(tmp_path: Path, actions: ActionsEmulator) -> AsyncIterator[Cluster]:
    async with KubeEmulator(
        tls=True, run_project_image=True, container_runtime=actions.runtime, restart_backoff=0.1
    ) as kube:
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig)
        writes: list[tuple[str, str, str]] = []
        recorder = asyncio.create_task(record_phases(kube, writes))
        async with client.ApiClient(await kube.configuration()) as api:
            yield Cluster(kube, actions, Objects(api), kubeconfig, writes)
        recorder.cancel()


async def install(cluster: Cluster) -> None:
    """What docs/install.md and the example tell a user to run."""
    await install_up_to_the_set(cluster)
    await cluster.kubectl("apply", "-f", "-", stdin=example_set(cluster.gh.config_url("my-org")))


async def install_up_to_the_set(
    cluster: Cluster, controller_env: Mapping[str, str] | None = None
) -> None:
    """docs/install.md's install up to the set: the controller (its container given the
    variables of `controller_env` too), the runner namespace and its GitHub Secret."""
    manifests = str(PROJECT_ROOT / "manifests")
    if controller_env:
        rendered = await cluster.kubectl("kustomize", manifests)
        docs = [d for d in yaml.safe_load_all(rendered) if d]
        for doc in docs:
            if doc["kind"] == "Deployment":
                container = doc["spec"]["template"]["spec"]["containers"][0]
                container["env"] += [{"name": k, "value": v} for k, v in controller_env.items()]
        await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    else:
        await cluster.kubectl("apply", "-k", manifests)
    await cluster.kubectl(
        "rollout", "status", "deployment/gha-controller", "-n", SYSTEM, "--timeout=60s"
    )
    await cluster.kubectl("create", "namespace", RUNNERS)
    await cluster.kubectl("apply", "-k", str(PROJECT_ROOT / "manifests/examples/runner-namespace"))
    token = cluster.gh.add_pat()
    await cluster.kubectl(
        "-n",
        RUNNERS,
        "create",
        "secret",
        "generic",
        "github-config",
        f"--from-literal=github_token={token}",
    )


async def listener_of(cluster: Cluster) -> JSONDict:
    async def probe() -> JSONDict | None:
        items = (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
        return items[0] if items else None

    return await cluster.until(probe, what="the AutoscalingListener")


async def test_an_autoscaling_runner_set_runs_jobs_with_least_privilege(cluster: Cluster) -> None:
    await install(cluster)
    listener = await listener_of(cluster)
    name = listener["metadata"]["name"]

    async def listener_ready() -> bool:
        pod = await cluster.get(POD, SYSTEM, name)
        conditions = ((pod or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    await cluster.until(listener_ready, what="the listener pod Ready")
    ars = await cluster.get(AUTOSCALING_RUNNER_SET, RUNNERS, NAME)
    assert ars is not None
    scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    assert cluster.gh.state.scale_sets[scale_set_id].name == NAME

    listener_user = f"system:serviceaccount:{SYSTEM}:{name}"
    allowed = {
        ("get", "ephemeralrunners"): "yes",
        # `ephemeralrunners/status` would be the runner named "status": the subresource is a flag.
        ("patch", "ephemeralrunners --subresource=status"): "yes",
        ("patch", "ephemeralrunners"): "no",
        ("patch", f"ephemeralrunnersets/{NAME}"): "yes",
        ("patch", "ephemeralrunnersets/someone-else"): "no",
        ("list", "ephemeralrunners"): "no",
        ("delete", "ephemeralrunners"): "no",
        ("get", "secrets"): "no",
        ("create", "pods"): "no",
    }
    for (verb, resource), expected in allowed.items():
        args = ["auth", "can-i", verb, *resource.split(), "-n", RUNNERS, f"--as={listener_user}"]
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        assert out.decode().strip() == expected, (verb, resource)

    jobs = [cluster.gh.enqueue_job(labels=[NAME], duration=0.5) for _ in range(3)]

    async def completed() -> bool:
        return all(cluster.gh.state.jobs[job].state == "completed" for job in jobs)

    await cluster.until(completed, what="three jobs completed")
    running = [(runner, actor) for runner, phase, actor in cluster.writes if phase == "Running"]
    assert len({runner for runner, _ in running}) >= 3
    assert {actor for _, actor in running} == {listener_user}, "only the listener writes Running"
    assert not [w for w in cluster.writes if w[1] == "Running" and w[2] != listener_user]

    # Deleting the set leaves nothing behind, in Kubernetes or on GitHub.
    await cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", NAME, "--timeout=60s")
    assert await cluster.get(EPHEMERAL_RUNNER_SET, RUNNERS, NAME) is None
    assert (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"] == []
    for kind, namespace, object_name in [
        (POD, SYSTEM, name),
        (SECRET, SYSTEM, f"{name}-config"),
        (SERVICE_ACCOUNT, SYSTEM, name),
        (ROLE, RUNNERS, name),
        (ROLE_BINDING, RUNNERS, name),
    ]:
        assert await cluster.get(kind, namespace, object_name) is None, (kind.kind, object_name)
    runner_pods = (await cluster.objects.list(POD, RUNNERS))["items"]
    assert runner_pods == []
    state = cluster.gh.state
    assert scale_set_id not in state.scale_sets
    assert [r for r in state.runners.values() if r.scale_set_id == scale_set_id] == []
    assert [s for s in state.sessions.values() if s.scale_set_id == scale_set_id] == []


async def test_deleting_the_set_while_a_job_runs_lets_it_finish_then_leaves_nothing(
    cluster: Cluster,
) -> None:
    await install(cluster)
    listener = await listener_of(cluster)
    listener_user = f"system:serviceaccount:{SYSTEM}:{listener['metadata']['name']}"
    job = cluster.gh.enqueue_job(labels=[NAME], duration=4.0)

    async def running() -> bool:
        return any(p == "Running" and a == listener_user for _, p, a in cluster.writes)

    await cluster.until(running, what="the job's runner Running")
    deletion = asyncio.create_task(
        cluster.kubectl("-n", RUNNERS, "delete", "autoscalingrunnerset", NAME, "--timeout=60s")
    )

    async def listener_gone() -> bool:
        return not (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]

    await cluster.until(listener_gone, what="the listener deleted first")
    assert cluster.gh.state.jobs[job].state != "completed", "the job still runs"
    assert await cluster.get(AUTOSCALING_RUNNER_SET, RUNNERS, NAME) is not None
    await deletion
    assert cluster.gh.state.jobs[job].state == "completed"
    assert cluster.gh.state.jobs[job].result == "succeeded"
    assert (await cluster.objects.list(POD, RUNNERS))["items"] == []
    assert cluster.gh.state.scale_sets == {} or all(
        s.name != NAME for s in cluster.gh.state.scale_sets.values()
    )
