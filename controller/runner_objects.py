"""Building the objects of a runner: EphemeralRunner, JIT config Secret, runner Pod.

arc-controllers.md 9.7-9.9 and 3.5-3.6: controller-computed labels and annotations win over the
user's ResourceMeta, label keys under an excluded prefix are never propagated, and every object
is controlled by its owner (controller=true, blockOwnerDeletion=true).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib import metadata

from controller.runner_rules import RUNNER_CONTAINER, JSONDict
from controller.runnerset_rules import (
    FAILED_LINEAGE_ANNOTATION,
    PATCH_ID_ANNOTATION,
    REVISION_ANNOTATION,
)

API_VERSION = "actions.github.com/v1alpha1"
RUNNER_FINALIZER = "ephemeralrunner.actions.github.com/finalizer"
REGISTRATION_FINALIZER = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
RUNNER_FINALIZERS = (RUNNER_FINALIZER, REGISTRATION_FINALIZER)

COMPONENT_LABEL = "app.kubernetes.io/component"
RUNNER_POD_LABEL = "actions-ephemeral-runner"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
CONTAINER_HOOK_LABEL = "runner-pod"
CONTAINER_HOOKS_ENV = "ACTIONS_RUNNER_CONTAINER_HOOKS"

JIT_TOKEN_KEY = "jitToken"
RUNNER_NAME_KEY = "runnerName"
RUNNER_ID_KEY = "runnerId"
SCALE_SET_ID_KEY = "scaleSetId"

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _package_version() -> str:
    try:
        return metadata.version("gha-runner-scaler")
    except metadata.PackageNotFoundError:
        return "dev"


USER_AGENT = f"gha-runner-scaler/{_package_version()}"


def fnv_hash_string(value: str) -> str:
    """ARC's FNVHashString: FNV-1a 32 as decimal, each digit mapped to a name-safe letter."""
    digest = 0x811C9DC5
    for byte in value.encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(digest))


def proxy_secret_name(*, set_name: str, namespace: str) -> str:
    return f"{set_name}-{fnv_hash_string(namespace)[:8]}-runner-proxy"


def controller_reference(owner: JSONDict) -> JSONDict:
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", API_VERSION),
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    *,
    excluded_prefixes: Sequence[str],
) -> dict[str, str]:
    merged = {**(base or {}), **(overwrite or {})}
    return {k: v for k, v in merged.items() if not k.startswith(tuple(excluded_prefixes))}


def _meta(obj: JSONDict) -> JSONDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _resource_meta(spec: JSONDict, key: str) -> tuple[dict[str, str], dict[str, str]]:
    value = spec.get(key) or {}
    return dict(value.get("labels") or {}), dict(value.get("annotations") or {})


def new_ephemeral_runner(
    runner_set: JSONDict,
    *,
    patch_id: int,
    revision: int,
    lineage: int = 0,
    excluded_prefixes: Sequence[str] = (),
) -> JSONDict:
    """A new EphemeralRunner of `runner_set` (generateName, both finalizers in the body)."""
    meta = _meta(runner_set)
    spec = runner_set.get("spec") or {}
    user_labels, user_annotations = _resource_meta(spec, "ephemeralRunnerMetadata")
    labels = filter_and_merge_labels(
        user_labels,
        {**(meta.get("labels") or {}), COMPONENT_LABEL: "runner"},
        excluded_prefixes=excluded_prefixes,
    )
    annotations = {
        **user_annotations,
        **(meta.get("annotations") or {}),
        PATCH_ID_ANNOTATION: str(patch_id),
        REVISION_ANNOTATION: str(revision),
    }
    if lineage:
        annotations[FAILED_LINEAGE_ANNOTATION] = str(lineage)
    runner_spec = copy.deepcopy(spec.get("ephemeralRunnerSpec") or {})
    if runner_spec.get("proxy"):
        runner_spec["proxySecretRef"] = proxy_secret_name(
            set_name=meta["name"], namespace=meta["namespace"]
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "EphemeralRunner",
        "metadata": {
            "generateName": f"{meta['name']}-runner-",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "finalizers": list(RUNNER_FINALIZERS),
            "ownerReferences": [controller_reference(runner_set)],
        },
        "spec": runner_spec,
    }


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def jit_secret(
    runner: JSONDict,
    *,
    encoded_jit_config: str,
    runner_name: str,
    runner_id: int,
    scale_set_id: int,
    excluded_prefixes: Sequence[str] = (),
) -> JSONDict:
    """The Secret holding a runner's JIT config, named like the runner and owned by it."""
    meta = _meta(runner)
    labels, annotations = _resource_meta(
        runner.get("spec") or {}, "ephemeralRunnerConfigSecretMetadata"
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": filter_and_merge_labels(labels, {}, excluded_prefixes=excluded_prefixes),
            "annotations": annotations,
            "ownerReferences": [controller_reference(runner)],
        },
        "data": {
            JIT_TOKEN_KEY: _b64(encoded_jit_config),
            RUNNER_NAME_KEY: _b64(runner_name),
            RUNNER_ID_KEY: _b64(str(runner_id)),
            SCALE_SET_ID_KEY: _b64(str(scale_set_id)),
        },
    }


def secret_value(secret: JSONDict, key: str) -> str | None:
    raw = (secret.get("data") or {}).get(key)
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw).decode()
    except ValueError:
        return None


def _template_hash(spec: JSONDict) -> str:
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return fnv_hash_string(digest)


def _runner_env(runner: JSONDict) -> list[JSONDict]:
    name = _meta(runner)["name"]
    env: list[JSONDict] = [
        {
            "name": "ACTIONS_RUNNER_INPUT_JITCONFIG",
            "valueFrom": {"secretKeyRef": {"name": name, "key": JIT_TOKEN_KEY}},
        },
        {"name": "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT", "value": USER_AGENT},
        {"name": "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE", "value": "1"},
    ]
    spec = runner.get("spec") or {}
    proxy_secret = spec.get("proxySecretRef")
    proxy = spec.get("proxy") or {}
    if proxy_secret:
        for key, present in (
            ("http_proxy", proxy.get("http")),
            ("https_proxy", proxy.get("https")),
            ("no_proxy", proxy.get("noProxy")),
        ):
            if present:
                env.append(
                    {
                        "name": key,
                        "valueFrom": {"secretKeyRef": {"name": proxy_secret, "key": key}},
                    }
                )
    return env


def runner_pod(runner: JSONDict) -> JSONDict:
    """The runner Pod: the template's PodSpec verbatim plus the runner container's env."""
    meta = _meta(runner)
    spec = runner.get("spec") or {}
    template_meta = spec.get("metadata") or {}
    pod_spec = copy.deepcopy(spec.get("spec") or {})
    env = _runner_env(runner)
    for container in pod_spec.get("containers") or []:
        if container.get("name") == RUNNER_CONTAINER:
            container["env"] = [*(container.get("env") or []), *copy.deepcopy(env)]
    labels = {
        **(meta.get("labels") or {}),
        **(template_meta.get("labels") or {}),
        RUNNER_POD_LABEL: "True",
        POD_TEMPLATE_HASH_LABEL: _template_hash(spec),
    }
    annotations = {**(meta.get("annotations") or {}), **(template_meta.get("annotations") or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_reference(runner)],
        },
        "spec": pod_spec,
    }


def has_container_hooks(runner: JSONDict) -> bool:
    """The first container named `runner` sets ACTIONS_RUNNER_CONTAINER_HOOKS (kubernetes mode)."""
    containers = ((runner.get("spec") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") == RUNNER_CONTAINER:
            return any(e.get("name") == CONTAINER_HOOKS_ENV for e in container.get("env") or [])
    return False


def runner_work_folder(runner: JSONDict) -> str:
    containers = ((runner.get("spec") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") == RUNNER_CONTAINER:
            return str(container.get("workingDir") or "")
    return ""
