"""docs/security.md's RBAC table, asked of the emulator's RBAC entry by entry with
`kubectl auth can-i --as=...`: the manifests applied as docs/install.md says, the listeners'
Roles made by the real controller (the example set's, and a set with a standby listener),
`manifests/listener/` for a `docker run` listener."""

from __future__ import annotations

import asyncio
import os
import re

import pytest
import yaml

from sandbox.kube.testing import PROJECT_ROOT
from shared.api.kinds import AUTOSCALING_LISTENER
from shared.kube.errors import NotFound
from shared.kube.objects import ROLE
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import (
    NAME,
    RUNNERS,
    SYSTEM,
    Cluster,
    example_set,
    install,
    listener_of,
)
from tests.sandbox.kube.test_kubectl import KUBECTL

DOC = PROJECT_ROOT / "docs" / "security.md"
Entry = tuple[str, str, str, str, bool]
"""(identity, namespace, verb, resource[/name][:subresource], allowed)"""
STANDBY_SET = "standby-runners"
STANDBY_LISTENER = "<standby-listener>"
"""In the table, the name of the standby set's listener (its Lease's), which the test learns."""

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def table() -> list[Entry]:
    text = DOC.read_text()
    section = text.split("## RBAC", 1)[1].split("\n## ", 1)[0]
    entries: list[Entry] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in {"Identity", "---"}:
            continue
        namespace = re.findall(r"`([^`]+)`", cells[1])[0]
        for column, allowed in ((cells[2], True), (cells[3], False)):
            for item in re.findall(r"`([^`]+)`", column):
                verb, what = item.split()
                entries.append((cells[0], namespace, verb, what, allowed))
    return entries


def test_the_table_covers_every_identity() -> None:
    identities = {entry[0] for entry in table()}
    assert identities == {
        "controller",
        "listener (in the cluster)",
        "listener (in the cluster, standby)",
        "listener (`docker run`)",
        "runner pods (`default`)",
        "controller, with `--metrics-auth`",
        "metrics reader (`prometheus-k8s`)",
    }
    assert len(table()) > 60


async def test_each_identity_can_do_exactly_what_docs_security_says(cluster: Cluster) -> None:
    await install(cluster)
    listener = await listener_of(cluster)
    listener_name = listener["metadata"]["name"]
    standby_set = yaml.safe_load(example_set(cluster.gh.config_url("my-org")))
    standby_set["metadata"]["name"] = STANDBY_SET
    standby_set["spec"]["listenerReplicas"] = 2
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(standby_set))
    standby = await standby_listener_of(cluster)

    async def roles_made() -> bool:
        try:
            for name in (listener_name, standby):
                await cluster.objects.get(ROLE, RUNNERS, name)
        except NotFound:
            return False
        return True

    await cluster.until(roles_made, what="the listeners' Roles")
    await cluster.kubectl("apply", "-n", RUNNERS, "-f", str(PROJECT_ROOT / "manifests/listener"))
    # The metrics-auth component's ClusterRole and the example's metrics reader
    # (docs/security.md#metrics).
    for path in ("metrics-auth/rbac.yaml", "examples/metrics-auth/metrics-reader.yaml"):
        await cluster.kubectl("apply", "-f", str(PROJECT_ROOT / "manifests" / path))
    users = {
        "controller": f"system:serviceaccount:{SYSTEM}:gha-controller",
        "listener (in the cluster)": f"system:serviceaccount:{SYSTEM}:{listener_name}",
        "listener (in the cluster, standby)": f"system:serviceaccount:{SYSTEM}:{standby}",
        "listener (`docker run`)": f"system:serviceaccount:{RUNNERS}:gha-listener",
        "runner pods (`default`)": f"system:serviceaccount:{RUNNERS}:default",
        "controller, with `--metrics-auth`": f"system:serviceaccount:{SYSTEM}:gha-controller",
        "metrics reader (`prometheus-k8s`)": "system:serviceaccount:monitoring:prometheus-k8s",
    }
    assert NAME == "my-runners", "the table names the example's set"
    wrong = []
    for identity, namespace, verb, what, allowed in table():
        target, _, subresource = what.replace(STANDBY_LISTENER, standby).partition(":")
        args = ["auth", "can-i", verb, target, "-n", namespace, f"--as={users[identity]}"]
        if subresource:
            args.append(f"--subresource={subresource}")
        answer = await can_i(cluster, args)
        if answer != allowed:
            wrong.append((identity, namespace, verb, what, answer))
    assert wrong == []


async def standby_listener_of(cluster: Cluster) -> str:
    async def probe() -> str | None:
        items: list[JSONDict] = (await cluster.objects.list(AUTOSCALING_LISTENER, SYSTEM))["items"]
        for item in items:
            if item["spec"]["autoscalingRunnerSetName"] == STANDBY_SET:
                return str(item["metadata"]["name"])
        return None

    return await cluster.until(probe, what="the standby set's AutoscalingListener")


async def can_i(cluster: Cluster, args: list[str]) -> bool:
    """kubectl exits 1 on "no", which Cluster.kubectl treats as a failure."""
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(cluster.kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(cluster.kubeconfig.parent)},
    )
    out, err = await proc.communicate()
    assert out.decode().strip() in {"yes", "no"}, err.decode()
    return out.decode().strip() == "yes"
