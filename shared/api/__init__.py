"""ARC-compatible models of the `actions.github.com/v1alpha1` custom resources.

The models are imported when first named (PEP 562, `__getattr__` below): the listener imports
modules of this package that hold none (`kinds`, `names`, `patchid`, `phases`, `timeline`,
`views`), and the models would bring pydantic into its import, about 12 MB
(docs/listener.md#memory). `tests/listener/test_light_imports.py` keeps it so.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from shared.api.phases import EphemeralRunnerPhase, is_terminal_phase

if TYPE_CHECKING:
    from shared.api.base import EmbeddedModel, KubeTime, WireModel
    from shared.api.embedded import (
        AzureKeyVaultConfig,
        ConfigMapKeySelector,
        Container,
        CounterMetric,
        EnvVar,
        GaugeMetric,
        HistogramMetric,
        LocalObjectReference,
        MetricsConfig,
        ObjectMeta,
        OwnerReference,
        PodSpec,
        PodTemplateSpec,
        ProxyConfig,
        ProxyServerConfig,
        ResourceMeta,
        TemplateMeta,
        TLSCertificateSource,
        TLSConfig,
        VaultConfig,
    )
    from shared.api.resources import (
        KINDS,
        AutoscalingListener,
        AutoscalingListenerSpec,
        AutoscalingListenerStatus,
        AutoscalingRunnerSet,
        AutoscalingRunnerSetPhase,
        AutoscalingRunnerSetSpec,
        AutoscalingRunnerSetStatus,
        EphemeralRunner,
        EphemeralRunnerSet,
        EphemeralRunnerSetPhase,
        EphemeralRunnerSetSpec,
        EphemeralRunnerSetStatus,
        EphemeralRunnerSpec,
        EphemeralRunnerStatus,
        InvalidResourceError,
        KubeObject,
        Resource,
        parse_resource,
    )

_MODULES = {
    "shared.api.base": ("EmbeddedModel", "KubeTime", "WireModel"),
    "shared.api.embedded": (
        "AzureKeyVaultConfig",
        "ConfigMapKeySelector",
        "Container",
        "CounterMetric",
        "EnvVar",
        "GaugeMetric",
        "HistogramMetric",
        "LocalObjectReference",
        "MetricsConfig",
        "ObjectMeta",
        "OwnerReference",
        "PodSpec",
        "PodTemplateSpec",
        "ProxyConfig",
        "ProxyServerConfig",
        "ResourceMeta",
        "TemplateMeta",
        "TLSCertificateSource",
        "TLSConfig",
        "VaultConfig",
    ),
    "shared.api.resources": (
        "KINDS",
        "AutoscalingListener",
        "AutoscalingListenerSpec",
        "AutoscalingListenerStatus",
        "AutoscalingRunnerSet",
        "AutoscalingRunnerSetPhase",
        "AutoscalingRunnerSetSpec",
        "AutoscalingRunnerSetStatus",
        "EphemeralRunner",
        "EphemeralRunnerSet",
        "EphemeralRunnerSetPhase",
        "EphemeralRunnerSetSpec",
        "EphemeralRunnerSetStatus",
        "EphemeralRunnerSpec",
        "EphemeralRunnerStatus",
        "InvalidResourceError",
        "KubeObject",
        "Resource",
        "parse_resource",
    ),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "KINDS",
    "AutoscalingListener",
    "AutoscalingListenerSpec",
    "AutoscalingListenerStatus",
    "AutoscalingRunnerSet",
    "AutoscalingRunnerSetPhase",
    "AutoscalingRunnerSetSpec",
    "AutoscalingRunnerSetStatus",
    "AzureKeyVaultConfig",
    "ConfigMapKeySelector",
    "Container",
    "CounterMetric",
    "EmbeddedModel",
    "EnvVar",
    "EphemeralRunner",
    "EphemeralRunnerPhase",
    "EphemeralRunnerSet",
    "EphemeralRunnerSetPhase",
    "EphemeralRunnerSetSpec",
    "EphemeralRunnerSetStatus",
    "EphemeralRunnerSpec",
    "EphemeralRunnerStatus",
    "GaugeMetric",
    "HistogramMetric",
    "InvalidResourceError",
    "KubeObject",
    "KubeTime",
    "LocalObjectReference",
    "MetricsConfig",
    "ObjectMeta",
    "OwnerReference",
    "PodSpec",
    "PodTemplateSpec",
    "ProxyConfig",
    "ProxyServerConfig",
    "Resource",
    "ResourceMeta",
    "TLSCertificateSource",
    "TLSConfig",
    "TemplateMeta",
    "VaultConfig",
    "WireModel",
    "is_terminal_phase",
    "parse_resource",
]
