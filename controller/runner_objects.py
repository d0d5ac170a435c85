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

from controller.runner_rules import JSONDict
from controller.runnerset_rules import FAILED_LINEAGE_ANNOTATION
from shared.api.names import (
    ANNOTATION_ACTIONABLE_REVISION,
    ANNOTATION_PATCH_ID,
    API_VERSION,
    COMPONENT_RUNNER,
    ENV_HTTP_PROXY,
    ENV_HTTPS_PROXY,
    ENV_NO_PROXY,
    ENV_RUNNER_CONTAINER_HOOKS,
    ENV_RUNNER_DEPRECATED_EXIT_CODE,
    ENV_RUNNER_EXTRA_USER_AGENT,
    ENV_RUNNER_JIT_CONFIG,
    EPHEMERAL_RUNNER_LABEL_VALUE,
    FINALIZER_EPHEMERAL_RUNNER,
    FINALIZER_EPHEMERAL_RUNNER_REGISTRATION,
    KIND_EPHEMERAL_RUNNER,
    LABEL_COMPONENT,
    LABEL_EPHEMERAL_RUNNER,
    LABEL_POD_TEMPLATE_HASH,
    RUNNER_CONTAINER,
    SECRET_JIT_TOKEN,
    SECRET_RUNNER_ID,
    SECRET_RUNNER_NAME,
    SECRET_SCALE_SET_ID,
)

RUNNER_FINALIZERS = (FINALIZER_EPHEMERAL_RUNNER, FINALIZER_EPHEMERAL_RUNNER_REGISTRATION)

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
        {**(meta.get("labels") or {}), LABEL_COMPONENT: COMPONENT_RUNNER},
        excluded_prefixes=excluded_prefixes,
    )
    annotations = {
        **user_annotations,
        **(meta.get("annotations") or {}),
        ANNOTATION_PATCH_ID: str(patch_id),
        ANNOTATION_ACTIONABLE_REVISION: str(revision),
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
        "kind": KIND_EPHEMERAL_RUNNER,
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
            SECRET_JIT_TOKEN: _b64(encoded_jit_config),
            SECRET_RUNNER_NAME: _b64(runner_name),
            SECRET_RUNNER_ID: _b64(str(runner_id)),
            SECRET_SCALE_SET_ID: _b64(str(scale_set_id)),
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


def secret_runner_id(secret: JSONDict) -> int:
    """The runner id a JIT Secret records; 0 when it records none."""
    value = secret_value(secret, SECRET_RUNNER_ID) or ""
    return int(value) if value.isdigit() else 0


def _template_hash(spec: JSONDict) -> str:
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return fnv_hash_string(digest)


def _runner_env(runner: JSONDict) -> list[JSONDict]:
    name = _meta(runner)["name"]
    env: list[JSONDict] = [
        {
            "name": ENV_RUNNER_JIT_CONFIG,
            "valueFrom": {"secretKeyRef": {"name": name, "key": SECRET_JIT_TOKEN}},
        },
        {"name": ENV_RUNNER_EXTRA_USER_AGENT, "value": USER_AGENT},
        {"name": ENV_RUNNER_DEPRECATED_EXIT_CODE, "value": "1"},
    ]
    spec = runner.get("spec") or {}
    proxy_secret = spec.get("proxySecretRef")
    proxy = spec.get("proxy") or {}
    if proxy_secret:
        for key, present in (
            (ENV_HTTP_PROXY, proxy.get("http")),
            (ENV_HTTPS_PROXY, proxy.get("https")),
            (ENV_NO_PROXY, proxy.get("noProxy")),
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
        LABEL_EPHEMERAL_RUNNER: EPHEMERAL_RUNNER_LABEL_VALUE,
        LABEL_POD_TEMPLATE_HASH: _template_hash(spec),
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
            env = container.get("env") or []
            return any(e.get("name") == ENV_RUNNER_CONTAINER_HOOKS for e in env)
    return False


def runner_work_folder(runner: JSONDict) -> str:
    containers = ((runner.get("spec") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") == RUNNER_CONTAINER:
            return str(container.get("workingDir") or "")
    return ""
