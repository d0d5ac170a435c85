"""The admission policies of manifests/admission/ against what they guard: the listener policy
compares every field of the EphemeralRunnerSet spec that a listener may not write, so a field
added to the CRD must be added to the policy too; and they name the controller's namespace."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[2]
ADMISSION = ROOT / "manifests" / "admission"
NAMESPACE = "gha-runner-scaler-system"


def _docs(name: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all((ADMISSION / name).read_text()) if d]


def test_the_listener_policy_compares_every_field_a_listener_may_not_write() -> None:
    crd = yaml.safe_load(
        (ROOT / "manifests/crds/actions.github.com_ephemeralrunnersets.yaml").read_text()
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    runners = spec["properties"]["ephemeralRunnerSpec"]["properties"]
    (policy, _) = _docs("listener-runner-sets.yaml")
    expression = str(policy["spec"]["validations"][0]["expression"])  # type: ignore[index]
    compared = set(re.findall(r"has\(object\.spec\.(\w+)\)", expression))
    compared |= {
        f"ephemeralRunnerSpec.{f}"
        for f in re.findall(r"has\(variables\.runners\.(\w+)\)", expression)
    }
    written = {"replicas", "patchID", "ephemeralRunnerSpec", "ephemeralRunnerSpec.runnerScaleSetId"}
    fields = set(spec["properties"]) | {f"ephemeralRunnerSpec.{f}" for f in runners}
    assert compared == fields - written


def test_the_policies_name_the_controller_namespace_of_the_install() -> None:
    for name in ("listener-runner-sets.yaml", "controller-writes.yaml"):
        text = (ADMISSION / name).read_text()
        found = set(re.findall(r"system:serviceaccount:([a-z0-9-]+):", text)) - {"kube-system"}
        assert found == {NAMESPACE}
    assert f"'{NAMESPACE}'" in (ADMISSION / "controller-writes.yaml").read_text()
