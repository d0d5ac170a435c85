"""The names a tenant writes into the runner kinds that the controller reads objects by, checked
as Kubernetes names where they are read (docs/security.md#names-from-tenants).

A runner spec (of an AutoscalingRunnerSet, EphemeralRunnerSet or EphemeralRunner) names its
GitHub config Secret, its proxies' credential Secrets and its CA ConfigMap; an
AutoscalingRunnerSet's `actions.github.com/cleanup-*` annotations name the Helm-made objects
whose finalizer its deletion strips. All of them are in the object's own namespace. Each check
answers one line per field at fault, with its path, in the API server's words; nothing may be
read by a name that has one. The CRDs refuse the spec fields too (`pattern`, `maxLength`), but a
cluster may hold ARC's CRDs, or objects made before these, and annotations have no schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api.kinds import CLEANUP_TARGETS
from shared.kube.names import NameRule, field_problem


def _at(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def runner_spec_name_problems(spec: Mapping[str, Any], *, at: str = "spec") -> list[str]:
    """The runner spec's fields (at the path `at`) that name an object and are not a name."""
    checks: list[tuple[str, Any]] = [("githubConfigSecret", spec.get("githubConfigSecret"))]
    for scheme in ("http", "https"):
        ref = _at(spec, "proxy", scheme, "credentialSecretRef")
        if ref:  # empty means no credentials (ARC's rule)
            checks.append((f"proxy.{scheme}.credentialSecretRef", ref))
    selector = _at(spec, "githubServerTLS", "certificateFrom", "configMapKeyRef")
    if selector:
        checks.append(
            ("githubServerTLS.certificateFrom.configMapKeyRef.name", _at(selector, "name"))
        )
    problems = (field_problem(f"{at}.{key}", value, NameRule.SUBDOMAIN) for key, value in checks)
    return [problem for problem in problems if problem]


def cleanup_annotation_problems(annotations: Mapping[str, Any] | None) -> list[str]:
    """The `actions.github.com/cleanup-*` annotations that are not a name for their kind."""
    problems: list[str] = []
    for annotation, kind in CLEANUP_TARGETS:
        value = (annotations or {}).get(annotation)
        if value:
            problem = field_problem(f"metadata.annotations[{annotation}]", value, kind.names)
            if problem:
                problems.append(problem)
    return problems


def autoscaling_runner_set_name_problems(ars: Mapping[str, Any]) -> list[str]:
    """Every name an AutoscalingRunnerSet gives that is not one."""
    metadata = ars.get("metadata") if isinstance(ars.get("metadata"), Mapping) else {}
    spec = ars.get("spec") if isinstance(ars.get("spec"), Mapping) else {}
    return [
        *runner_spec_name_problems(spec or {}),
        *cleanup_annotation_problems(_at(metadata, "annotations")),
    ]
