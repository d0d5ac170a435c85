"""What the EphemeralRunnerSet reconciler builds: its EphemeralRunners, the proxy Secret their
pods read (docs/reconcilers.md#objects) and the PodDisruptionBudget of its busy runner pods
(docs/reconcilers.md#busy-pods)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from controller.ephemeralrunnerset.rules import FAILED_LINEAGE_ANNOTATION
from controller.runners.busy import BUDGET_MIN_AVAILABLE, busy_selector
from controller.runners.objects import (
    ANNOTATION_RUNNER_SPEC_HASH,
    filter_and_merge_labels,
    propagated_annotations,
    proxy_secret_name,
    resource_meta,
)
from controller.runtime.controllerutil import controller_reference
from shared.api.names import (
    ANNOTATION_ACTIONABLE_REVISION,
    ANNOTATION_PATCH_ID,
    API_VERSION,
    COMPONENT_RUNNER,
    EPHEMERAL_RUNNER_FINALIZERS,
    KIND_EPHEMERAL_RUNNER,
    LABEL_COMPONENT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
)
from shared.kube.views import metadata_of, uid_of
from shared.typedefs import JSONDict

SCALE_SET_LABELS = (LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE)


def new_ephemeral_runner(
    runner_set: JSONDict,
    *,
    patch_id: int,
    revision: int,
    lineage: int = 0,
    excluded_prefixes: Sequence[str] = (),
) -> JSONDict:
    """A new EphemeralRunner of `runner_set` (generateName, both finalizers in the body)."""
    meta = metadata_of(runner_set)
    spec = runner_set.get("spec") or {}
    user_labels, user_annotations = resource_meta(spec, "ephemeralRunnerMetadata")
    labels = filter_and_merge_labels(
        user_labels,
        {**(meta.get("labels") or {}), LABEL_COMPONENT: COMPONENT_RUNNER},
        excluded_prefixes=excluded_prefixes,
    )
    set_annotations = propagated_annotations(meta.get("annotations"))
    set_annotations.pop(ANNOTATION_RUNNER_SPEC_HASH, None)
    annotations = {
        **user_annotations,
        **set_annotations,
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
            "finalizers": list(EPHEMERAL_RUNNER_FINALIZERS),
            "ownerReferences": [controller_reference(runner_set)],
        },
        "spec": runner_spec,
    }


def proxy_secret(runner_set: JSONDict, data: dict[str, str]) -> JSONDict:
    """The Secret runner pods read their proxy variables from (`data` already base64)."""
    meta = metadata_of(runner_set)
    labels = meta.get("labels") or {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": proxy_secret_name(set_name=meta["name"], namespace=meta["namespace"]),
            "namespace": meta["namespace"],
            "labels": {
                k: labels[k]
                for k in (LABEL_SCALE_SET_NAME, LABEL_SCALE_SET_NAMESPACE)
                if k in labels
            },
            "ownerReferences": [controller_reference(runner_set)],
        },
        "data": data,
    }


def busy_budget(runner_set: JSONDict) -> JSONDict:
    """The PodDisruptionBudget that refuses the eviction of the set's busy runner pods: named
    like the set, in its namespace, controlled by it (the garbage collector deletes it with the
    set or the namespace)."""
    meta = metadata_of(runner_set)
    labels = meta.get("labels") or {}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {k: labels[k] for k in SCALE_SET_LABELS if k in labels},
            "ownerReferences": [controller_reference(runner_set)],
        },
        "spec": {
            "minAvailable": BUDGET_MIN_AVAILABLE,
            "selector": {"matchLabels": busy_selector(uid_of(runner_set))},
        },
    }
