"""Construction of EphemeralRunners, JIT Secrets and runner Pods (docs/reconcilers.md#objects)."""

from __future__ import annotations

import pytest

from controller.ephemeralrunner.objects import jit_secret, runner_pod
from controller.ephemeralrunnerset.objects import new_ephemeral_runner
from controller.runners.objects import fnv_hash_string, is_tool_annotation, proxy_secret_name
from shared.api.views import has_container_hooks
from shared.kube.views import secret_value
from shared.typedefs import JSONDict


def runner_set(*, proxy: bool = False) -> JSONDict:
    spec: JSONDict = {
        "githubConfigUrl": "https://github.com/owner/repo",
        "githubConfigSecret": "gh",
        "runnerScaleSetId": 7,
        "metadata": {"labels": {"tpl": "label"}, "annotations": {"team": "template"}},
        "spec": {
            "containers": [
                {"name": "runner", "image": "runner:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "dind", "image": "docker"},
            ]
        },
    }
    if proxy:
        spec["proxy"] = {"http": {"url": "http://proxy:3128"}, "noProxy": ["example.com"]}
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": "arc",
            "namespace": "ns",
            "uid": "ers-uid",
            "labels": {
                "actions.github.com/scale-set-name": "arc",
                "app.kubernetes.io/component": "runner-set",
                "example.com/private": "x",
            },
            "annotations": {"actions.github.com/runner-group-name": "default"},
        },
        "spec": {
            "replicas": 1,
            "patchID": 4,
            "ephemeralRunnerSpec": spec,
            "ephemeralRunnerMetadata": {
                "labels": {"user": "l", "app.kubernetes.io/component": "user-wins?"},
                "annotations": {"user": "a", "actions.github.com/patch-id": "99"},
            },
        },
    }


def test_new_runner_metadata_and_ownership() -> None:
    er = new_ephemeral_runner(
        runner_set(), patch_id=4, revision=2, excluded_prefixes=("example.com/",)
    )
    meta = er["metadata"]
    assert meta["generateName"] == "arc-runner-"
    assert meta["namespace"] == "ns"
    assert meta["finalizers"] == [
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ]
    assert meta["labels"] == {
        "actions.github.com/scale-set-name": "arc",
        "app.kubernetes.io/component": "runner",
        "user": "l",
    }
    assert meta["annotations"] == {
        "actions.github.com/runner-group-name": "default",
        "actions.github.com/patch-id": "4",
        "actions.github.com/actionable-revision": "2",
        "user": "a",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "name": "arc",
            "uid": "ers-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert er["spec"] == runner_set()["spec"]["ephemeralRunnerSpec"]


def test_new_runner_with_proxy_references_the_set_proxy_secret() -> None:
    er = new_ephemeral_runner(runner_set(proxy=True), patch_id=0, revision=0)
    assert er["spec"]["proxySecretRef"] == proxy_secret_name(set_name="arc", namespace="ns")


def test_tool_annotations_stay_on_the_set_and_on_the_runner() -> None:
    tools = {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "meta.helm.sh/release-name": "runners",
        "internal.config.kubernetes.io/path": "set.yaml",
    }
    ers = runner_set()
    ers["metadata"]["annotations"].update(tools)
    er = new_ephemeral_runner(ers, patch_id=0, revision=0)
    assert not set(tools) & set(er["metadata"]["annotations"])
    # A runner ARC made carries the set's annotations, kubectl's included.
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    er["metadata"]["annotations"].update(tools)
    annotations = runner_pod(er)["metadata"]["annotations"]
    assert not set(tools) & set(annotations)
    assert annotations["actions.github.com/runner-group-name"] == "default"


def test_tool_annotations_are_matched_by_domain_and_subdomain() -> None:
    assert is_tool_annotation("kustomize.toolkit.fluxcd.io/ssa")
    assert is_tool_annotation("argocd.argoproj.io/tracking-id")
    assert not is_tool_annotation("notkubectl.kubernetes.io/x")
    assert not is_tool_annotation("kubectl.kubernetes.io")
    assert not is_tool_annotation("actions.github.com/values-hash")


def test_fnv_hash_string_is_arcs() -> None:
    # The published FNV-1a 32 test vector for "a" is 0xe40c292c = 3826002220; each decimal
    # digit maps through ARC's name-safe alphabet.
    assert fnv_hash_string("a") == "".join(
        "bcdfghjklmnpqrstvwxz2456789"[ord(c) % 27] for c in "3826002220"
    )


def test_jit_secret() -> None:
    er = new_ephemeral_runner(runner_set(), patch_id=0, revision=0)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    secret = jit_secret(
        er, encoded_jit_config="ZW5j", runner_name="arc-runner-abcde", runner_id=12, scale_set_id=7
    )
    assert secret["metadata"]["name"] == "arc-runner-abcde"
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "EphemeralRunner"
    assert {k: secret_value(secret, k) for k in secret["data"]} == {
        "jitToken": "ZW5j",
        "runnerName": "arc-runner-abcde",
        "runnerId": "12",
        "scaleSetId": "7",
    }


def test_runner_pod() -> None:
    er = new_ephemeral_runner(runner_set(proxy=True), patch_id=0, revision=0)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    pod = runner_pod(er)
    meta = pod["metadata"]
    assert meta["name"] == "arc-runner-abcde"
    assert meta["ownerReferences"][0]["uid"] == "er-uid"
    assert meta["labels"]["actions-ephemeral-runner"] == "True"
    assert meta["labels"]["tpl"] == "label"
    assert meta["labels"]["pod-template-hash"]
    assert meta["annotations"]["team"] == "template"
    runner, dind = pod["spec"]["containers"]
    env = {e["name"]: e for e in runner["env"]}
    assert list(env) == [
        "A",
        "ACTIONS_RUNNER_INPUT_JITCONFIG",
        "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT",
        "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE",
        "http_proxy",
        "no_proxy",
    ]
    assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"] == {
        "name": "arc-runner-abcde",
        "key": "jitToken",
    }
    assert env["ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"]["value"] == "1"
    assert env["http_proxy"]["valueFrom"]["secretKeyRef"]["name"] == er["spec"]["proxySecretRef"]
    assert "env" not in dind
    assert len(er["spec"]["spec"]["containers"][0]["env"]) == 1


def test_container_hooks_detected_on_the_runner_container() -> None:
    er = new_ephemeral_runner(runner_set(), patch_id=0, revision=0)
    assert not has_container_hooks(er)
    er["spec"]["spec"]["containers"][0]["env"].append(
        {"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/hooks/index.js"}
    )
    assert has_container_hooks(er)


@pytest.mark.parametrize(
    ("template", "automount"),
    [
        ({}, False),
        ({"automountServiceAccountToken": True}, True),
        ({"automountServiceAccountToken": False}, False),
        # Container mode `kubernetes`: the hooks act as the ServiceAccount the template names.
        ({"serviceAccountName": "arc-runners-kube-mode"}, None),
        ({"serviceAccount": "arc-runners-kube-mode"}, None),
        ({"serviceAccountName": ""}, False),
    ],
)
def test_runner_pod_mounts_no_token_unless_the_template_asks(
    template: dict[str, object], automount: bool | None
) -> None:
    """A job's code runs in the pod: by default it gets no Kubernetes token to steal
    (ARC mounts the `<set>-no-permission` ServiceAccount's)."""
    er = new_ephemeral_runner(runner_set(), patch_id=0, revision=0)
    er["metadata"].update(name="arc-runner-abcde", uid="er-uid")
    er["spec"]["spec"].update(template)
    pod_spec = runner_pod(er)["spec"]
    assert pod_spec.get("automountServiceAccountToken") is automount
    assert er["spec"]["spec"].get("automountServiceAccountToken") is template.get(
        "automountServiceAccountToken"
    )
