"""An invalid custom resource of each of the four kinds is refused by the API server holding
manifests/crds, with the path of the field at fault: through kubernetes-asyncio (the object
client's `Invalid`) and through `kubectl apply` (its error line), nothing stored either way."""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    EPHEMERAL_RUNNER,
    EPHEMERAL_RUNNER_SET,
)
from shared.kube.errors import Invalid, NotFound
from shared.kube.names import SUBDOMAIN_PATTERN
from shared.kube.objects import Kind, Objects
from tests.sandbox.kube.test_kubectl import KUBECTL
from tests.shared.api.conftest import load_fixture

NAMESPACE = "arc-runners"
SERVER_OWNED = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
KINDS = {
    "arc-autoscalingrunnerset.yaml": AUTOSCALING_RUNNER_SET,
    "arc-autoscalinglistener.yaml": AUTOSCALING_LISTENER,
    "arc-ephemeralrunnerset.yaml": EPHEMERAL_RUNNER_SET,
    "arc-ephemeralrunner.yaml": EPHEMERAL_RUNNER,
}
MISSING = object()
# (fixture, field path, value written there or MISSING to delete it)
INVALID = [
    ("arc-autoscalingrunnerset.yaml", "spec.maxRunners", -1),
    ("arc-autoscalingrunnerset.yaml", "spec.minRunners", "two"),
    ("arc-autoscalinglistener.yaml", "spec.maxRunners", -1),
    ("arc-autoscalinglistener.yaml", "spec.runnerScaleSetId", "seven"),
    ("arc-ephemeralrunnerset.yaml", "spec.replicas", -1),
    ("arc-ephemeralrunnerset.yaml", "spec.patchID", "7"),
    ("arc-ephemeralrunner.yaml", "spec.runnerScaleSetId", MISSING),
    ("arc-ephemeralrunner.yaml", "spec.githubConfigUrl", 5),
    # Names the controller reads objects by (docs/security.md#names-from-tenants): traversal,
    # encoded, absolute, empty, over-long, uppercase and newline-terminated forms.
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "../../team-b/secrets/gh"),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "%2e%2e%2Fteam-b"),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "/api/v1/namespaces/b/secrets/gh"),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", ""),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "x" * 254),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "GitHub-Config"),
    ("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "github-config\n"),
    ("arc-autoscalingrunnerset.yaml", "spec.proxy.https.credentialSecretRef", "../b/secrets/p"),
    (
        "arc-autoscalingrunnerset.yaml",
        "spec.githubServerTLS.certificateFrom.configMapKeyRef.name",
        "../../team-b/configmaps/ca",
    ),
    ("arc-autoscalinglistener.yaml", "spec.autoscalingRunnerSetNamespace", "team-b/x"),
    ("arc-autoscalinglistener.yaml", "spec.githubConfigSecret", ".."),
    ("arc-ephemeralrunnerset.yaml", "spec.ephemeralRunnerSpec.githubConfigSecret", "a/b"),
    ("arc-ephemeralrunner.yaml", "spec.githubConfigSecret", "%2F"),
    ("arc-ephemeralrunner.yaml", "spec.proxySecretRef", "../p"),
]


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[tuple[KubeEmulator, Objects, Path]]:
    # TLS, because kubectl sends no bearer token over plain HTTP.
    async with KubeEmulator(tls=True) as emulator:
        emulator.apply_crds(project_crds())
        emulator.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        kubeconfig = tmp_path / "kubeconfig"
        emulator.write_kubeconfig(kubeconfig)
        async with client.ApiClient(await emulator.configuration()) as api:
            yield emulator, Objects(api, timeout=10), kubeconfig


def invalid(fixture: str, path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(load_fixture(fixture))
    body.pop("status", None)
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in SERVER_OWNED}
    body["metadata"]["namespace"] = NAMESPACE
    *parents, leaf = path.split(".")
    target = body
    for key in parents:
        target = target[key]
    if value is MISSING:
        del target[leaf]
    else:
        target[leaf] = value
    return body


async def absent(objects: Objects, kind: Kind, name: str) -> bool:
    try:
        await objects.get(kind, NAMESPACE, name)
    except NotFound:
        return True
    return False


def test_the_table_covers_the_four_kinds() -> None:
    assert {fixture for fixture, _, _ in INVALID} == set(KINDS)


@pytest.mark.parametrize(("fixture", "path", "value"), INVALID)
async def test_kubernetes_asyncio_gets_the_field_path(
    kube: tuple[KubeEmulator, Objects, Path], fixture: str, path: str, value: Any
) -> None:
    _, objects, _ = kube
    body = invalid(fixture, path, value)
    with pytest.raises(Invalid, match=path.replace(".", r"\.")):
        await objects.create(KINDS[fixture], NAMESPACE, body)
    assert await absent(objects, KINDS[fixture], body["metadata"]["name"])


async def test_a_bad_name_is_refused_in_the_real_servers_words(
    kube: tuple[KubeEmulator, Objects, Path],
) -> None:
    _, objects, _ = kube
    body = invalid("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "../../b/s/gh")
    with pytest.raises(Invalid) as refused:
        await objects.create(AUTOSCALING_RUNNER_SET, NAMESPACE, body)
    assert (
        'spec.githubConfigSecret: Invalid value: "../../b/s/gh": spec.githubConfigSecret in body '
        f"should match '{SUBDOMAIN_PATTERN}'"
    ) in refused.value.message
    body = invalid("arc-autoscalingrunnerset.yaml", "spec.githubConfigSecret", "x" * 254)
    with pytest.raises(Invalid) as refused:
        await objects.create(AUTOSCALING_RUNNER_SET, NAMESPACE, body)
    assert "spec.githubConfigSecret: Too long: may not be more than 253 bytes" in (
        refused.value.message
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
@pytest.mark.parametrize(("fixture", "path", "value"), INVALID)
async def test_kubectl_apply_prints_the_field_path(
    kube: tuple[KubeEmulator, Objects, Path], fixture: str, path: str, value: Any
) -> None:
    _, objects, kubeconfig = kube
    body = invalid(fixture, path, value)
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "apply",
        "-f",
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(kubeconfig.parent)},
    )
    _, err = await asyncio.wait_for(proc.communicate(yaml.safe_dump(body).encode()), 60)
    assert proc.returncode == 1
    assert path in err.decode()
    assert await absent(objects, KINDS[fixture], body["metadata"]["name"])
