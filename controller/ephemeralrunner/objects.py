"""What the EphemeralRunner reconciler builds: the JIT config Secret and the runner Pod, both
named like the runner and controlled by it (docs/reconcilers.md#objects)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Sequence
from importlib import metadata

from controller.runners.objects import (
    filter_and_merge_labels,
    fnv_hash_string,
    propagated_annotations,
    resource_meta,
)
from controller.runtime.controllerutil import controller_reference
from shared.api.names import (
    ENV_HTTP_PROXY,
    ENV_HTTPS_PROXY,
    ENV_NO_PROXY,
    ENV_RUNNER_DEPRECATED_EXIT_CODE,
    ENV_RUNNER_EXTRA_USER_AGENT,
    ENV_RUNNER_JIT_CONFIG,
    EPHEMERAL_RUNNER_LABEL_VALUE,
    LABEL_EPHEMERAL_RUNNER,
    LABEL_POD_TEMPLATE_HASH,
    RUNNER_CONTAINER,
    SECRET_JIT_TOKEN,
    SECRET_RUNNER_ID,
    SECRET_RUNNER_NAME,
    SECRET_SCALE_SET_ID,
)
from shared.kube.views import metadata_of
from shared.typedefs import JSONDict


def _package_version() -> str:
    try:
        return metadata.version("gha-runner-scaler")
    except metadata.PackageNotFoundError:
        return "dev"


USER_AGENT = f"gha-runner-scaler/{_package_version()}"


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
    meta = metadata_of(runner)
    labels, annotations = resource_meta(
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


def _template_hash(spec: JSONDict) -> str:
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return fnv_hash_string(digest)


def _runner_env(runner: JSONDict) -> list[JSONDict]:
    name = metadata_of(runner)["name"]
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


def _asks_for_token(pod_spec: JSONDict) -> bool:
    """Whether the template decides the ServiceAccount token itself: it sets
    `automountServiceAccountToken`, or names a ServiceAccount (container mode `kubernetes` names
    the one its hooks act as)."""
    return "automountServiceAccountToken" in pod_spec or bool(
        pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    )


def runner_pod(runner: JSONDict) -> JSONDict:
    """The runner Pod: the template's PodSpec verbatim plus the runner container's env, and no
    ServiceAccount token unless the template asks for one (docs/security.md#identities)."""
    meta = metadata_of(runner)
    spec = runner.get("spec") or {}
    template_meta = spec.get("metadata") or {}
    pod_spec = copy.deepcopy(spec.get("spec") or {})
    if not _asks_for_token(pod_spec):
        pod_spec["automountServiceAccountToken"] = False
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
    annotations = {
        **propagated_annotations(meta.get("annotations")),
        **(template_meta.get("annotations") or {}),
    }
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
