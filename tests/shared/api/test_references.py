"""The names a runner kind gives, checked where they are read (docs/security.md#names-from-
tenants): each field at fault with its path; every object a released ARC leaves passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.references import (
    autoscaling_runner_set_name_problems,
    runner_spec_name_problems,
)
from tests.controller.arc_released import LINES, autoscaling_runner_set, ephemeral_runner_set
from tests.shared.api.conftest import load_fixture

ARC_HELM = Path(__file__).parents[2] / "controller/arc_helm/objects.yaml"
BAD = "../../team-b/secrets/github-config"


def test_every_object_arc_leaves_passes() -> None:
    for doc in yaml.safe_load_all(ARC_HELM.read_text()):
        if doc and doc["kind"] == "AutoscalingRunnerSet":
            assert autoscaling_runner_set_name_problems(doc) == []
        if doc and doc["kind"] in ("EphemeralRunner", "AutoscalingListener"):
            assert runner_spec_name_problems(doc["spec"]) == []
    ars = load_fixture("arc-autoscalingrunnerset.yaml")
    assert autoscaling_runner_set_name_problems(ars) == []
    assert runner_spec_name_problems(load_fixture("arc-ephemeralrunner.yaml")["spec"]) == []
    for line in LINES.values():
        released = autoscaling_runner_set(
            line,
            name="arc-runner-set",
            namespace="arc-runners",
            config_url="https://github.com/o",
            secret="arc-runner-set-gha-rs-github-secret",
            scale_set_id=1,
            template={"spec": {"containers": [{"name": "runner", "image": "r"}]}},
        )
        assert autoscaling_runner_set_name_problems(released) == []
        released["metadata"]["uid"] = "made-by-the-server"
        spec = ephemeral_runner_set(released)["spec"]["ephemeralRunnerSpec"]
        assert runner_spec_name_problems(spec) == []


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"githubConfigSecret": BAD}, "spec.githubConfigSecret"),
        ({"githubConfigSecret": "%2e%2e"}, "spec.githubConfigSecret"),
        ({"githubConfigSecret": ""}, "spec.githubConfigSecret"),
        ({"githubConfigSecret": 7}, "spec.githubConfigSecret"),
        (
            {"proxy": {"http": {"url": "http://p", "credentialSecretRef": "/api/v1/x"}}},
            "spec.proxy.http.credentialSecretRef",
        ),
        (
            {"githubServerTLS": {"certificateFrom": {"configMapKeyRef": {"key": "k"}}}},
            "spec.githubServerTLS.certificateFrom.configMapKeyRef.name",
        ),
        (
            {"githubServerTLS": {"certificateFrom": {"configMapKeyRef": {"name": "CA"}}}},
            "spec.githubServerTLS.certificateFrom.configMapKeyRef.name",
        ),
    ],
)
def test_a_bad_name_is_named_by_its_field(edit: dict[str, Any], field: str) -> None:
    spec = {"githubConfigUrl": "https://github.com/o", "githubConfigSecret": "gh", **edit}
    [problem] = runner_spec_name_problems(spec)
    assert problem.startswith(f"{field}: ")


def test_an_absent_secret_is_required_and_empty_proxy_credentials_are_none() -> None:
    assert runner_spec_name_problems({}) == ["spec.githubConfigSecret: Required value"]
    spec = {"githubConfigSecret": "gh", "proxy": {"https": {"credentialSecretRef": ""}}}
    assert runner_spec_name_problems(spec) == []
    nested = runner_spec_name_problems({"githubConfigSecret": BAD}, at="spec.ephemeralRunnerSpec")
    assert nested[0].startswith("spec.ephemeralRunnerSpec.githubConfigSecret: Invalid value")


def test_cleanup_annotations_follow_their_kinds_rule() -> None:
    ars: dict[str, Any] = {
        "metadata": {
            "annotations": {
                "actions.github.com/cleanup-github-secret-name": BAD,
                # A RoleBinding may be named by any path segment, as on a real server.
                "actions.github.com/cleanup-manager-role-binding": "Manager:Binding",
                "actions.github.com/cleanup-manager-role-name": "../x",
            }
        },
        "spec": {"githubConfigSecret": "gh"},
    }
    problems = autoscaling_runner_set_name_problems(ars)
    assert [p.split(": ", 1)[0] for p in problems] == [
        "metadata.annotations[actions.github.com/cleanup-github-secret-name]",
        "metadata.annotations[actions.github.com/cleanup-manager-role-name]",
    ]
