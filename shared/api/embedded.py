"""Kubernetes and ARC types embedded in the four custom resources.

Kubernetes types (metadata, pod template, references) and the proxy and TLS settings keep
fields they do not name, so an object loads and dumps back without losing anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.api.base import EmbeddedModel, KubeTime, ObjectName, PreservedModel, WireModel
from shared.api.names import ENV_RUNNER_CONTAINER_HOOKS, RUNNER_CONTAINER


class OwnerReference(EmbeddedModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(EmbeddedModel):
    """metav1.ObjectMeta of a custom resource (the API server owns its schema)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: KubeTime | None = None
    deletion_timestamp: KubeTime | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None


class TemplateMeta(EmbeddedModel):
    """Pod template metadata: name, namespace, labels, annotations and finalizers are kept."""

    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None


class EnvVar(PreservedModel):
    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = None


class Container(PreservedModel):
    """A container; the fields the controller reads are named, the others are kept as given."""

    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    working_dir: str | None = None


class PodSpec(PreservedModel):
    containers: list[Container]
    init_containers: list[Container] | None = None

    def container(self, name: str) -> Container | None:
        """The first container with this name (ARC inspects only the first)."""
        return next((c for c in self.containers if c.name == name), None)


class PodTemplateSpec(EmbeddedModel):
    metadata: TemplateMeta | None = None
    spec: PodSpec | None = None

    def has_container_hook_configured(self) -> bool:
        """The `runner` container sets ACTIONS_RUNNER_CONTAINER_HOOKS (kubernetes mode)."""
        runner = self.spec.container(RUNNER_CONTAINER) if self.spec else None
        return runner is not None and any(
            env.name == ENV_RUNNER_CONTAINER_HOOKS for env in runner.env or ()
        )


class LocalObjectReference(EmbeddedModel):
    name: str | None = None


class ConfigMapKeySelector(EmbeddedModel):
    key: str
    name: ObjectName | None = None
    optional: bool | None = None


class ResourceMeta(WireModel):
    """Extra labels and annotations for an object the controller creates."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class ProxyServerConfig(EmbeddedModel):
    url: str | None = Field(default=None, description="Proxy URL (required by ARC).")
    credential_secret_ref: ObjectName | None = Field(
        default=None,
        description="Secret with `username` and `password` keys, injected as URL userinfo.",
    )


class ProxyConfig(EmbeddedModel):
    http: ProxyServerConfig | None = None
    https: ProxyServerConfig | None = None
    no_proxy: list[str] | None = None


class TLSCertificateSource(EmbeddedModel):
    config_map_key_ref: ConfigMapKeySelector | None = None


class TLSConfig(EmbeddedModel):
    certificate_from: TLSCertificateSource | None = Field(
        default=None, description="Extra root CA (PEM) from a ConfigMap key."
    )


class AzureKeyVaultConfig(WireModel):
    url: str
    tenant_id: str
    client_id: str
    certificate_path: str


class VaultConfig(WireModel):
    type: str | None = Field(
        default=None, description="`azure_key_vault` is the only vault type ARC knows."
    )
    azure_key_vault: AzureKeyVaultConfig | None = None
    proxy: ProxyConfig | None = None


class CounterMetric(WireModel):
    labels: list[str]


class GaugeMetric(WireModel):
    labels: list[str]


class HistogramMetric(WireModel):
    labels: list[str]
    buckets: list[float] | None = None


class MetricsConfig(WireModel):
    """Listener metrics: which `gha_*` metrics to export with which labels."""

    counters: dict[str, CounterMetric] | None = None
    gauges: dict[str, GaugeMetric] | None = None
    histograms: dict[str, HistogramMetric] | None = None
