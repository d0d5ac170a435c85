"""A hostile tenant's names (docs/security.md#names-from-tenants), tried on the system as a
platform team runs it: `kubectl apply -k manifests/`, the controller process under its
ServiceAccount and the RBAC of manifests/, two runner namespaces `team-a` and `team-b`, each with
its own GitHub config Secret, and a user `tenant-a` who may edit the runner kinds in `team-a`
only. A second Actions emulator stands in for a GitHub Enterprise host that tenant controls.

The tenant's names must never make the controller read `team-b`'s Secret (the controller may, for
`team-b`'s own sets) and send it to that host. The shipped CRDs refuse such names at `kubectl
apply`; the controller refuses them on its own too, for a cluster that still holds CRDs without
the constraints (ARC's, or older ones), which is what these tests install after checking the
first.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest
import yaml

from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.testing import PROJECT_ROOT
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER
from shared.api.names import (
    ANNOTATION_CLEANUP_GITHUB_SECRET_NAME,
    ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING,
    FINALIZER_CLEANUP_PROTECTION,
)
from shared.kube.objects import SECRET
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import SYSTEM, Cluster
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

TEAM_A, TEAM_B = "team-a", "team-b"
TENANT = "tenant-a"
CONTROLLER_USER = f"system:serviceaccount:{SYSTEM}:gha-controller"
TEAM_B_SECRET = "../../team-b/secrets/github-config"
# The forms a name may take to become another path: traversal, encoded, absolute.
SECRET_FORMS = {
    "traversal": TEAM_B_SECRET,
    "encoded": "%2e%2e%2F%2e%2e%2Fteam-b%2Fsecrets%2Fgithub-config",
    "absolute": "/api/v1/namespaces/team-b/secrets/github-config",
}


@pytest.fixture
async def attacker() -> AsyncIterator[ActionsEmulator]:
    """The GitHub Enterprise host the tenant controls."""
    async with ActionsEmulator(long_poll_timeout=0.5) as emulator:
        yield emulator


async def kubectl_fails(cluster: Cluster, *args: str, stdin: str) -> str:
    """Run kubectl expecting it to fail; its stderr."""
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(cluster.kubeconfig),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(cluster.kubeconfig.parent)},
    )
    _, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode != 0, "kubectl succeeded"
    return err.decode()


def runner_namespace(namespace: str, rendered: str) -> str:
    """The controller's Role and RoleBinding of manifests/examples/runner-namespace, moved to
    `namespace` (the example names arc-runners; a platform copies it per namespace)."""
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(docs)


TENANT_RBAC = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: runner-kinds-editor, namespace: {TEAM_A}}}
rules:
  - apiGroups: [actions.github.com]
    resources: [autoscalingrunnersets, ephemeralrunnersets, ephemeralrunners]
    verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: tenant-a, namespace: {TEAM_A}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: runner-kinds-editor}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {TENANT}}}]
"""


async def install_two_tenants(cluster: Cluster) -> None:
    """The system and both tenant namespaces, each with its own PAT."""
    await cluster.kubectl("apply", "-k", str(PROJECT_ROOT / "manifests"))
    await cluster.kubectl(
        "rollout", "status", "deployment/gha-controller", "-n", SYSTEM, "--timeout=60s"
    )
    rendered = await cluster.kubectl(
        "kustomize", str(PROJECT_ROOT / "manifests/examples/runner-namespace")
    )
    for namespace in (TEAM_A, TEAM_B):
        await cluster.kubectl("create", "namespace", namespace)
        await cluster.kubectl("apply", "-f", "-", stdin=runner_namespace(namespace, rendered))
        await cluster.kubectl(
            "-n",
            namespace,
            "create",
            "secret",
            "generic",
            "github-config",
            f"--from-literal=github_token={cluster.gh.add_pat()}",
        )
    # What a Helm release of ARC leaves on its Secret: the finalizer a cleanup annotation strips.
    await cluster.objects.patch(
        SECRET,
        TEAM_B,
        "github-config",
        {"metadata": {"finalizers": [FINALIZER_CLEANUP_PROTECTION]}},
    )
    await cluster.kubectl("apply", "-f", "-", stdin=TENANT_RBAC)


def runner_set(name: str, config_url: str, spec: JSONDict | None = None) -> JSONDict:
    doc = yaml.safe_load(
        (PROJECT_ROOT / "manifests/examples/autoscalingrunnerset.yaml").read_text()
    )
    doc["metadata"] = {"name": name, "namespace": TEAM_A}
    doc["spec"]["githubConfigUrl"] = config_url
    doc["spec"]["githubConfigSecret"] = "github-config"
    doc["spec"].update(spec or {})
    return dict(doc)


async def constraints_removed_from_the_crds(cluster: Cluster) -> None:
    """The CRDs as ARC ships them in this respect: name fields are plain strings."""

    def strip(node: object) -> None:
        if isinstance(node, dict):
            node.pop("pattern", None)
            node.pop("maxLength", None)
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    rendered = await cluster.kubectl("kustomize", str(PROJECT_ROOT / "manifests/crds"))
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    strip(docs)
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def hostile_sets(attacker_url: str) -> dict[str, tuple[JSONDict, str]]:
    """Each set the tenant writes, with the field its refusal must name."""
    sets: dict[str, tuple[JSONDict, str]] = {
        f"secret-{form}": (
            runner_set(f"secret-{form}", attacker_url, {"githubConfigSecret": value}),
            "spec.githubConfigSecret",
        )
        for form, value in SECRET_FORMS.items()
    }
    proxy = {"https": {"url": "http://proxy.invalid:3128", "credentialSecretRef": TEAM_B_SECRET}}
    sets["proxy"] = (
        runner_set("proxy", attacker_url, {"proxy": proxy}),
        "spec.proxy.https.credentialSecretRef",
    )
    tls = {"certificateFrom": {"configMapKeyRef": {"name": "../../team-b/configmaps/ca"}}}
    tls["certificateFrom"]["configMapKeyRef"]["key"] = "ca.crt"
    sets["tls"] = (
        runner_set("tls", attacker_url, {"githubServerTLS": tls}),
        "spec.githubServerTLS.certificateFrom.configMapKeyRef.name",
    )
    cleanup = runner_set("cleanup", attacker_url)
    cleanup["metadata"]["annotations"] = {
        ANNOTATION_CLEANUP_GITHUB_SECRET_NAME: TEAM_B_SECRET,
        ANNOTATION_CLEANUP_MANAGER_ROLE_BINDING: "../../team-b/rolebindings/x",
    }
    sets["cleanup"] = (cleanup, f"metadata.annotations[{ANNOTATION_CLEANUP_GITHUB_SECRET_NAME}]")
    return sets


def stray_runner(attacker_url: str) -> JSONDict:
    """An EphemeralRunner the tenant writes directly, naming team-b's Secret."""
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": "stray", "namespace": TEAM_A},
        "spec": {
            "githubConfigUrl": attacker_url,
            "githubConfigSecret": TEAM_B_SECRET,
            "runnerScaleSetId": 1,
            "spec": {"containers": [{"name": "runner", "image": "runner:latest"}]},
        },
    }


def stray_runner_set(attacker_url: str) -> JSONDict:
    """An EphemeralRunnerSet the tenant writes directly, whose proxy credentials are
    team-b's Secret: the set would read it to make its runners' proxy Secret."""
    proxy = {"https": {"url": "http://proxy.invalid:3128", "credentialSecretRef": TEAM_B_SECRET}}
    runner = stray_runner(attacker_url)["spec"]
    runner.update(githubConfigSecret="github-config", proxy=proxy)
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "stray-set", "namespace": TEAM_A},
        "spec": {"replicas": 1, "patchID": 0, "ephemeralRunnerSpec": runner},
    }


async def condition_of(cluster: Cluster, name: str) -> JSONDict | None:
    ars = await cluster.get(AUTOSCALING_RUNNER_SET, TEAM_A, name)
    conditions = ((ars or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "NamesValid"), None)


async def warnings_for(cluster: Cluster, name: str) -> list[JSONDict]:
    events = (await cluster.kubectl("get", "events", "-n", TEAM_A, "-o", "yaml")).strip()
    return [
        event
        for event in yaml.safe_load(events)["items"]
        if event["involvedObject"]["name"] == name
        and event["type"] == "Warning"
        and event["reason"] == "InvalidName"
    ]


def team_b_reads(cluster: Cluster) -> list[str]:
    """Every request the controller made in team-b (it has no set there)."""
    return [
        f"{r.verb} {r.path}"
        for r in cluster.kube.requests.log
        if r.user == CONTROLLER_USER and r.namespace == TEAM_B
    ]


async def test_the_shipped_crds_refuse_a_tenants_bad_name_at_kubectl_apply(
    cluster: Cluster, attacker: ActionsEmulator
) -> None:
    await install_two_tenants(cluster)
    refused = [
        *hostile_sets(attacker.config_url("evil")).values(),
        (stray_runner(attacker.config_url("evil")), "spec.githubConfigSecret"),
        (
            stray_runner_set(attacker.config_url("evil")),
            "spec.ephemeralRunnerSpec.proxy.https.credentialSecretRef",
        ),
    ]
    for body, field in refused:
        if field.startswith("metadata."):
            continue  # annotations have no schema: the controller's check is all there is
        err = await kubectl_fails(
            cluster, "apply", f"--as={TENANT}", "-f", "-", stdin=yaml.safe_dump(body)
        )
        assert f"{field}: Invalid value" in err, err
        assert "in body should match" in err, err
    assert (await cluster.objects.list(AUTOSCALING_RUNNER_SET, TEAM_A))["items"] == []


async def test_a_tenant_cannot_send_another_tenants_credentials_to_its_host(
    cluster: Cluster, attacker: ActionsEmulator
) -> None:
    await install_two_tenants(cluster)
    await constraints_removed_from_the_crds(cluster)
    sets = hostile_sets(attacker.config_url("evil"))
    # The control: a set of team-a's own, with valid names, runs.
    control = runner_set("own", cluster.gh.config_url("team-a-org"))
    strays = [
        stray_runner(attacker.config_url("evil")),
        stray_runner_set(attacker.config_url("evil")),
    ]
    for body in [control, *(body for body, _ in sets.values()), *strays]:
        await cluster.kubectl("apply", f"--as={TENANT}", "-f", "-", stdin=yaml.safe_dump(body))

    async def control_runs() -> bool:
        listeners = (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
        return any(listener["spec"]["autoscalingRunnerSetName"] == "own" for listener in listeners)

    await cluster.until(control_runs, what="team-a's own set running")
    for name, (_, field) in sets.items():

        async def refused(name: str = name) -> JSONDict | None:
            condition = await condition_of(cluster, name)
            return condition if condition and condition["status"] == "False" else None

        condition = await cluster.until(refused, what=f"{name} refused")
        assert condition["reason"] == "InvalidName"
        assert condition["message"].startswith(f"{field}: Invalid value: "), condition
        [warning] = await warnings_for(cluster, name)
        assert field in warning["message"]

    async def stray_failed() -> JSONDict | None:
        runner = await cluster.get(EPHEMERAL_RUNNER, TEAM_A, "stray")
        status = (runner or {}).get("status") or {}
        return status if status.get("phase") == "Failed" else None

    status = await cluster.until(stray_failed, what="the stray runner failed")
    assert status["reason"] == "InvalidName"
    assert status["message"].startswith("spec.githubConfigSecret: Invalid value: ")

    # The tenant deletes the set whose cleanup annotations name team-b's objects.
    await cluster.kubectl(
        "delete", f"--as={TENANT}", "-n", TEAM_A, "autoscalingrunnerset", "cleanup"
    )

    async def cleanup_gone() -> bool:
        return await cluster.get(AUTOSCALING_RUNNER_SET, TEAM_A, "cleanup") is None

    await cluster.until(cleanup_gone, what="the set with hostile cleanup annotations deleted")
    secret = await cluster.get(SECRET, TEAM_B, "github-config")
    assert secret is not None
    assert secret["metadata"]["finalizers"] == [FINALIZER_CLEANUP_PROTECTION]

    assert team_b_reads(cluster) == []
    assert attacker.state.requests == []
    # The stray set made no runner, and says which of its fields it refused.
    runners = (await cluster.objects.list(EPHEMERAL_RUNNER, TEAM_A))["items"]
    assert [r["metadata"]["name"] for r in runners] == ["stray"]
    refusals = await warnings_for(cluster, "stray-set")
    assert refusals
    assert all(
        e["message"].startswith(
            "spec.ephemeralRunnerSpec.proxy.https.credentialSecretRef: Invalid value: "
        )
        for e in refusals
    ), refusals
    assert cluster.kube.requests.count(user=CONTROLLER_USER, namespace=TEAM_A) > 0

    # Fixed, the name is used, in team-a, and the condition says so.
    await cluster.kubectl(
        "patch",
        f"--as={TENANT}",
        "-n",
        TEAM_A,
        "autoscalingrunnerset",
        "secret-traversal",
        "--type=merge",
        "-p",
        '{"spec": {"githubConfigSecret": "github-config"}}',
    )

    async def valid() -> JSONDict | None:
        condition = await condition_of(cluster, "secret-traversal")
        return condition if condition and condition["status"] == "True" else None

    await cluster.until(valid, what="the fixed set's names valid")
    assert team_b_reads(cluster) == []
