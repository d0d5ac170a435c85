"""Pod security of what `kubectl kustomize` renders from manifests/ (docs/security.md#pod-security):
every pod template runs as non-root with no privilege escalation; the controller's also drops
every capability, uses the RuntimeDefault seccomp profile and a read-only root filesystem."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
import yaml

from controller.autoscalinglistener.objects import listener_pod
from sandbox.kube.admission.podsecurity import evaluate, namespace_policy
from sandbox.kube.testing import PROJECT_ROOT
from tests.sandbox.kube.test_kubectl import KUBECTL

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def pod_templates(kustomization: str) -> list[tuple[str, dict[str, Any]]]:
    assert KUBECTL is not None
    rendered = subprocess.run(
        [KUBECTL, "kustomize", str(PROJECT_ROOT / kustomization)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [
        (doc["metadata"]["name"], doc["spec"]["template"]["spec"])
        for doc in yaml.safe_load_all(rendered)
        if doc and doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "Job"}
    ]


def test_the_install_runs_one_pod_template_the_controller_as_the_image_user() -> None:
    templates = pod_templates("manifests")
    assert [name for name, _ in templates] == ["gha-controller"]
    user = templates[0][1]["securityContext"]["runAsUser"]
    image_user = re.search(r"^USER (\d+):", (PROJECT_ROOT / "Dockerfile").read_text(), re.M)
    assert image_user is not None
    assert int(image_user.group(1)) == user


def test_every_rendered_pod_runs_as_non_root_without_privilege_escalation() -> None:
    for name, spec in pod_templates("manifests"):
        pod = spec.get("securityContext") or {}
        assert pod.get("runAsNonRoot") is True, name
        assert pod.get("runAsUser", 0) > 0, name
        assert pod.get("seccompProfile") == {"type": "RuntimeDefault"}, name
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec), name
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = container.get("securityContext") or {}
            assert context.get("allowPrivilegeEscalation") is False, (name, container["name"])
            assert context.get("privileged") is not True, (name, container["name"])
            assert context.get("capabilities", {}).get("drop") == ["ALL"], name
            assert "add" not in context.get("capabilities", {}), name
            assert context.get("readOnlyRootFilesystem") is True, name


def rendered_namespace() -> dict[str, Any]:
    assert KUBECTL is not None
    rendered = subprocess.run(
        [KUBECTL, "kustomize", str(PROJECT_ROOT / "manifests")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    [namespace] = [
        doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] == "Namespace"
    ]
    found: dict[str, Any] = namespace
    return found


def test_the_controller_namespace_enforces_restricted_and_its_pods_pass() -> None:
    """The install's namespace enforces Pod Security `restricted` at a pinned version
    (docs/security.md#listener-pod), and what runs there passes it: the controller's pods and a
    listener pod as the controller makes it, judged by the emulator's admission."""
    labels = rendered_namespace()["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
        assert labels[f"pod-security.kubernetes.io/{mode}-version"] == "v1.32"
    policy, problems = namespace_policy(labels)
    assert problems == []
    for name, spec in pod_templates("manifests"):
        assert evaluate(policy.enforce, {}, spec) == "", name
    listener = listener_pod(
        {"metadata": {"name": "l", "namespace": "n", "uid": "u"}, "spec": {"image": "i"}},
        config_digest="d",
        metrics_addr=":8090",
    )
    assert evaluate(policy.enforce, listener["metadata"], listener["spec"]) == ""
