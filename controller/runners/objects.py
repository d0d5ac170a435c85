"""Building blocks of the objects both runner reconcilers build: ARC's name hash, the proxy
Secret's name, label propagation (docs/reconcilers.md#objects: controller-computed labels win
over the user's, and label keys under an excluded prefix are never propagated) and annotation
propagation (tool-owned annotations stay on the object the tool applied)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

from shared.typedefs import JSONDict

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# The key domains (a domain or any subdomain of it) of annotations that deployment tools keep on
# the objects they apply; each describes that object only (docs/reconcilers.md#objects).
TOOL_ANNOTATION_DOMAINS = (
    "kubectl.kubernetes.io",  # kubectl: last-applied-configuration, restartedAt
    "meta.helm.sh",  # Helm: the release that owns the object
    "helm.sh",  # Helm: hooks, hook weights and deletion policies, resource-policy
    "argocd.argoproj.io",  # Argo CD: tracking-id, sync options and waves, hooks, compare options
    "config.kubernetes.io",  # kustomize and kpt: origin, path, index, local-config
    "config.k8s.io",  # kustomize: id, behavior, needs-hash (kustomize.config.k8s.io)
    "fluxcd.io",  # Flux: reconcile requests, SSA and prune options
    "objectset.rio.cattle.io",  # Rancher Fleet: the applied manifest, its object set
    "pulumi.com",  # Pulumi: auto-naming, patch force, skip-await
)


def fnv_hash_string(value: str) -> str:
    """ARC's FNVHashString: FNV-1a 32 as decimal, each digit mapped to a name-safe letter."""
    digest = 0x811C9DC5
    for byte in value.encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(digest))


def proxy_secret_name(*, set_name: str, namespace: str) -> str:
    """The Secret a set's runner pods read their proxy variables from."""
    return f"{set_name}-{fnv_hash_string(namespace)[:8]}-runner-proxy"


def filter_and_merge_labels(
    base: Mapping[str, str] | None,
    overwrite: Mapping[str, str] | None,
    *,
    excluded_prefixes: Sequence[str],
) -> dict[str, str]:
    merged = {**(base or {}), **(overwrite or {})}
    return {k: v for k, v in merged.items() if not k.startswith(tuple(excluded_prefixes))}


def resource_meta(spec: JSONDict, key: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of a ResourceMeta field (`ephemeralRunnerMetadata`...)."""
    value = spec.get(key) or {}
    return dict(value.get("labels") or {}), dict(value.get("annotations") or {})


def is_tool_annotation(key: str) -> bool:
    domain, slash, _ = key.partition("/")
    return bool(slash) and any(
        domain == tool or domain.endswith(f".{tool}") for tool in TOOL_ANNOTATION_DOMAINS
    )


def propagated_annotations(annotations: Mapping[str, str] | None) -> dict[str, str]:
    """The annotations of an object that its children inherit: all but the tool-owned ones."""
    return {k: v for k, v in (annotations or {}).items() if not is_tool_annotation(k)}


ANNOTATION_RUNNER_SPEC_HASH = "actions.github.com/runner-spec-hash"
"""On an EphemeralRunnerSet: the `json_digest` of the runner spec its `actionableRevision` stands
for, so a change of the runner spec is told from a re-apply of the same one (which must not
advance the revision and recycle idle runners). Written by the AutoscalingRunnerSet on the sets it
controls, by the set itself otherwise (docs/reconcilers.md#revisions)."""


def json_digest(value: object) -> str:
    """A stable digest of a JSON value (key order does not matter), for integrity annotations."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


DIGEST = re.compile(r"[0-9a-f]{16}")


def is_own_digest(value: str | None) -> bool:
    """Whether `value` is a `json_digest` (16 hex digits), as this controller writes
    `ANNOTATION_RUNNER_SPEC_HASH`. Released ARC writes its own digest there, at most ten letters
    and digits of its own alphabet (docs/install.md#keeping-arcs-helm-release), which tells
    nothing about the spec this controller would build."""
    return value is not None and DIGEST.fullmatch(value) is not None
