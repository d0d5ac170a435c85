"""CRD validation ratcheting, as a v1.30+ API server does it (on by default): once a CRD gains a
constraint (here the name patterns of docs/crds.md#compatibility-with-arc), an object made before
it can still be written as long as the write leaves the offending value as it was; a write that
changes that value must meet the constraint."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from sandbox.kube.emulator import KubeEmulator, project_crds
from shared.api.kinds import AUTOSCALING_RUNNER_SET
from shared.kube.errors import Invalid
from shared.kube.objects import Objects

ARS_CRD = next(p for p in project_crds() if p.name.endswith("autoscalingrunnersets.yaml"))


def _without_constraints(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _without_constraints(v) for k, v in node.items() if k not in ("pattern", "maxLength")
        }
    if isinstance(node, list):
        return [_without_constraints(v) for v in node]
    return node


async def test_an_object_from_before_the_constraint_stays_writable(
    kube: KubeEmulator, objects: Objects, ns: str
) -> None:
    shipped = yaml.safe_load(ARS_CRD.read_text())
    kube.apply_crds([_without_constraints(copy.deepcopy(shipped))])
    body = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "old"},
        "spec": {"githubConfigUrl": "https://github.com/o", "githubConfigSecret": "Old_Secret"},
    }
    await objects.create(AUTOSCALING_RUNNER_SET, ns, body)
    kube.apply_crds([shipped])

    # Unchanged offending value: the metadata and the status can still be written.
    await objects.patch(AUTOSCALING_RUNNER_SET, ns, "old", {"metadata": {"labels": {"a": "b"}}})
    status = {"status": {"conditions": [{"type": "NamesValid", "status": "False"}]}}
    await objects.patch(AUTOSCALING_RUNNER_SET, ns, "old", status, status=True)
    # A new value must meet the constraint; a new object too.
    with pytest.raises(Invalid, match=r"spec\.githubConfigSecret in body should match"):
        await objects.patch(
            AUTOSCALING_RUNNER_SET, ns, "old", {"spec": {"githubConfigSecret": "../x"}}
        )
    with pytest.raises(Invalid, match=r"spec\.githubConfigSecret in body should match"):
        await objects.create(AUTOSCALING_RUNNER_SET, ns, {**body, "metadata": {"name": "new"}})
    fixed = await objects.patch(
        AUTOSCALING_RUNNER_SET, ns, "old", {"spec": {"githubConfigSecret": "github-config"}}
    )
    assert fixed["spec"]["githubConfigSecret"] == "github-config"
