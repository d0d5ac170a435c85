"""The four custom resources of `actions.github.com/v1alpha1`, with ARC's wire names.

Fields follow ARC's Go types, by their JSON names (docs/crds.md#the-models), plus the newer
upstream fields of EphemeralRunnerSet (`spec.actionableRevision`,
`status.appliedActionableRevision`, `status.finishedRunnerCleanupPatchID`:
docs/crds.md#newer-upstream-fields). A field that is `None` is absent on the wire.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from shared.api.base import Int64, KubeTime, NamespaceName, ObjectName, WireModel
from shared.api.embedded import (
    LocalObjectReference,
    MetricsConfig,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    ProxyConfig,
    ResourceMeta,
    TemplateMeta,
    TLSConfig,
    VaultConfig,
)
from shared.api.names import (
    API_VERSION,
    KIND_AUTOSCALING_LISTENER,
    KIND_AUTOSCALING_RUNNER_SET,
    KIND_EPHEMERAL_RUNNER,
    KIND_EPHEMERAL_RUNNER_SET,
    MAX_LISTENER_REPLICAS,
    MAX_RUNNERS_UNBOUNDED,
)
from shared.api.phases import EphemeralRunnerPhase
from shared.policy import ScalingPolicy


class AutoscalingRunnerSetPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    OUTDATED = "Outdated"


class EphemeralRunnerSetPhase(StrEnum):
    RUNNING = "Running"
    OUTDATED = "Outdated"


def _blank_is_unset(value: object) -> object:
    # ARC serialises these phases without omitempty, so a Go client may write "".
    return None if value == "" else value


def _check_min_not_above_max(min_runners: int | None, info: ValidationInfo) -> int | None:
    max_runners = info.data.get("max_runners")
    if min_runners is not None and max_runners is not None and min_runners > max_runners:
        raise ValueError(f"must not be greater than maxRunners ({min_runners} > {max_runners})")
    return min_runners


def _check_policy_bounds(
    policy: ScalingPolicy | None, info: ValidationInfo
) -> ScalingPolicy | None:
    max_runners = info.data.get("max_runners")
    if policy is not None:
        problems = policy.bound_problems(
            min_runners=info.data.get("min_runners") or 0,
            max_runners=MAX_RUNNERS_UNBOUNDED if max_runners is None else max_runners,
        )
        if problems:
            raise ValueError("; ".join(problems))
    return policy


class KubeObject(WireModel):
    """Type and object metadata shared by the four kinds."""

    api_version: Literal["actions.github.com/v1alpha1"] = API_VERSION
    kind: str
    metadata: ObjectMeta

    @model_validator(mode="after")
    def _type_meta_always_on_the_wire(self) -> Self:
        self.model_fields_set.update({"api_version", "kind"})
        return self

    @property
    def is_deleting(self) -> bool:
        """The object has a deletionTimestamp: it waits for its finalizers."""
        return self.metadata.deletion_timestamp is not None


# AutoscalingRunnerSet


class AutoscalingRunnerSetSpec(WireModel):
    github_config_url: str | None = Field(
        default=None,
        description="GitHub URL of the enterprise, organization or repository (required).",
    )
    github_config_secret: ObjectName | None = Field(
        default=None,
        description="Secret in this namespace with the GitHub App or PAT credentials (required).",
    )
    runner_group: str | None = Field(
        default=None, description="Runner group of the scale set; empty means Default."
    )
    runner_scale_set_name: str | None = Field(
        default=None, description="Name of the scale set on GitHub; defaults to this object's."
    )
    runner_scale_set_labels: list[str] | None = Field(
        default=None, description="Extra scale set labels, applied when the scale set is created."
    )
    proxy: ProxyConfig | None = None
    github_server_tls: TLSConfig | None = Field(default=None, alias="githubServerTLS")
    vault_config: VaultConfig | None = None
    template: PodTemplateSpec | None = Field(
        default=None, description="Runner pod template; the container named `runner` is special."
    )
    autoscaling_listener: ResourceMeta | None = None
    listener_metrics: MetricsConfig | None = None
    listener_template: PodTemplateSpec | None = Field(
        default=None, description="Overrides merged into the listener pod."
    )
    listener_service_account_metadata: ResourceMeta | None = None
    listener_role_metadata: ResourceMeta | None = None
    listener_role_binding_metadata: ResourceMeta | None = None
    listener_config_secret_metadata: ResourceMeta | None = None
    ephemeral_runner_set_metadata: ResourceMeta | None = None
    ephemeral_runner_metadata: ResourceMeta | None = None
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    max_runners: int | None = Field(
        default=None, ge=0, description="Most runners at once; unset means unbounded."
    )
    min_runners: int | None = Field(
        default=None, ge=0, description="Idle runners kept ready; unset means 0."
    )
    scaling_policy: ScalingPolicy | None = Field(
        default=None, description="Not in ARC: capacity policies (docs/policies.md)."
    )
    listener_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LISTENER_REPLICAS,
        description="Not in ARC: listener pods of the scale set, one holding the message "
        "session and the others standing by on a Lease (docs/autoscaling.md#listener-standby); "
        "unset means 1.",
    )

    _min_not_above_max = field_validator("min_runners")(_check_min_not_above_max)
    _policy_within_bounds = field_validator("scaling_policy")(_check_policy_bounds)

    @property
    def effective_min_runners(self) -> int:
        return self.min_runners or 0

    @property
    def effective_max_runners(self) -> int:
        return MAX_RUNNERS_UNBOUNDED if self.max_runners is None else self.max_runners


class Condition(WireModel):
    """A Kubernetes condition (metav1.Condition), as `kubectl describe` shows it."""

    type: str
    status: str = Field(description='"True", "False" or "Unknown".')
    reason: str = ""
    message: str = ""
    last_transition_time: KubeTime | None = None
    observed_generation: Int64 | None = None


class AutoscalingRunnerSetStatus(WireModel):
    current_runners: int = 0
    phase: Annotated[AutoscalingRunnerSetPhase | None, BeforeValidator(_blank_is_unset)] = Field(
        default=None, strict=False
    )
    pending_ephemeral_runners: int = 0
    running_ephemeral_runners: int = 0
    failed_ephemeral_runners: int = 0
    conditions: list[Condition] | None = Field(
        default=None,
        description="Not in ARC: what is wrong, for `kubectl describe` (docs/crds.md).",
    )


class AutoscalingRunnerSet(KubeObject):
    """A runner scale set: the controller registers it on GitHub and runs its listener."""

    kind: Literal["AutoscalingRunnerSet"] = KIND_AUTOSCALING_RUNNER_SET
    spec: AutoscalingRunnerSetSpec
    status: AutoscalingRunnerSetStatus | None = None


# AutoscalingListener


class AutoscalingListenerSpec(WireModel):
    github_config_url: str | None = None
    github_config_secret: ObjectName | None = None
    runner_scale_set_id: int | None = None
    autoscaling_runner_set_namespace: NamespaceName | None = None
    autoscaling_runner_set_name: ObjectName | None = None
    ephemeral_runner_set_name: ObjectName | None = None
    max_runners: int | None = Field(default=None, ge=0)
    min_runners: int | None = Field(default=None, ge=0)
    image: str | None = None
    image_pull_secrets: list[LocalObjectReference] | None = None
    proxy: ProxyConfig | None = None
    github_server_tls: TLSConfig | None = Field(default=None, alias="githubServerTLS")
    vault_config: VaultConfig | None = None
    metrics: MetricsConfig | None = None
    template: PodTemplateSpec | None = None
    config_secret_metadata: ResourceMeta | None = None
    service_account_metadata: ResourceMeta | None = None
    role_metadata: ResourceMeta | None = None
    role_binding_metadata: ResourceMeta | None = None
    scaling_policy: ScalingPolicy | None = Field(
        default=None, description="Not in ARC: the set's capacity policies (docs/policies.md)."
    )
    listener_replicas: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LISTENER_REPLICAS,
        description="Not in ARC: the set's listenerReplicas; above 1, the listener pods share a "
        "Lease named as this listener (docs/autoscaling.md#listener-standby).",
    )

    _min_not_above_max = field_validator("min_runners")(_check_min_not_above_max)
    _policy_within_bounds = field_validator("scaling_policy")(_check_policy_bounds)


class AutoscalingListenerStatus(WireModel):
    """Empty: ARC never writes a listener status."""


class AutoscalingListener(KubeObject):
    """The listener of one scale set, in the controller namespace."""

    kind: Literal["AutoscalingListener"] = KIND_AUTOSCALING_LISTENER
    spec: AutoscalingListenerSpec
    status: AutoscalingListenerStatus | None = None


# EphemeralRunner


class EphemeralRunnerSpec(WireModel):
    """A runner: credentials, scale set, and the pod template inlined (`metadata`, `spec`)."""

    github_config_url: str
    github_config_secret: ObjectName
    github_server_tls: TLSConfig | None = Field(default=None, alias="githubServerTLS")
    runner_scale_set_id: int = Field(description="Scale set the JIT config is requested for.")
    proxy: ProxyConfig | None = None
    proxy_secret_ref: ObjectName | None = Field(
        default=None, description="Secret holding http_proxy, https_proxy and no_proxy."
    )
    vault_config: VaultConfig | None = None
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    metadata: TemplateMeta | None = None
    spec: PodSpec | None = None

    @property
    def pod_template(self) -> PodTemplateSpec:
        return PodTemplateSpec(metadata=self.metadata, spec=self.spec)


class EphemeralRunnerStatus(WireModel):
    ready: bool = Field(default=False, description="The runner pod's Ready condition is True.")
    phase: EphemeralRunnerPhase | None = Field(default=None, strict=False)
    reason: str | None = None
    message: str | None = None
    runner_id: int | None = Field(default=None, description="Runner id on GitHub.")
    runner_name: str | None = None
    failures: dict[str, KubeTime] | None = Field(
        default=None, description="Pod UID to the time its failure was recorded."
    )
    job_request_id: Int64 | None = None
    job_id: str | None = None
    job_repository_name: str | None = Field(default=None, description="owner/repo of the job.")
    job_workflow_ref: str | None = None
    workflow_run_id: Int64 | None = None
    job_display_name: str | None = None
    timeline: dict[str, str] | None = Field(
        default=None,
        description="The job's moments between offer and start, RFC 3339 on the listener's "
        "clock, and what held it (docs/job-timeline.md). Not in ARC's CRD.",
    )

    def last_failure(self) -> datetime | None:
        return max(self.failures.values(), default=None) if self.failures else None


class EphemeralRunner(KubeObject):
    """One single-use runner and its pod."""

    kind: Literal["EphemeralRunner"] = KIND_EPHEMERAL_RUNNER
    spec: EphemeralRunnerSpec
    status: EphemeralRunnerStatus | None = None

    @property
    def phase(self) -> EphemeralRunnerPhase | None:
        return self.status.phase if self.status else None

    def is_done(self) -> bool:
        return self.phase is not None and self.phase.is_terminal

    def has_job(self) -> bool:
        """`shared.api.views.has_job` on the model: a `jobId` or a `jobRequestId`."""
        return bool(self.status and (self.status.job_id or self.status.job_request_id))

    def has_container_hook_configured(self) -> bool:
        return self.spec.pod_template.has_container_hook_configured()


# EphemeralRunnerSet


class EphemeralRunnerSetSpec(WireModel):
    replicas: int = Field(
        default=0, ge=0, description="Desired runners, written by the listener; absent means 0."
    )
    patch_id: int = Field(
        alias="patchID",
        description="Id of the listener patch that produced `replicas`; 0 is authoritative.",
    )
    actionable_revision: Int64 | None = Field(
        default=None, description="Revision of the runner spec the set should run (upstream)."
    )
    ephemeral_runner_spec: EphemeralRunnerSpec
    ephemeral_runner_metadata: ResourceMeta | None = None


class EphemeralRunnerSetStatus(WireModel):
    current_replicas: int
    pending_ephemeral_runners: int = 0
    running_ephemeral_runners: int = 0
    failed_ephemeral_runners: int = 0
    phase: Annotated[EphemeralRunnerSetPhase | None, BeforeValidator(_blank_is_unset)] = Field(
        default=None, strict=False
    )
    applied_actionable_revision: Int64 | None = Field(
        default=None, description="The actionableRevision the runners were last aligned to."
    )
    finished_runner_cleanup_patch_id: int | None = Field(
        default=None,
        alias="finishedRunnerCleanupPatchID",
        description="Patch id whose finished runners were cleaned up; defers scale-up.",
    )


class EphemeralRunnerSet(KubeObject):
    """The runners of one scale set; the listener patches `replicas` and `patchID`."""

    kind: Literal["EphemeralRunnerSet"] = KIND_EPHEMERAL_RUNNER_SET
    spec: EphemeralRunnerSetSpec
    status: EphemeralRunnerSetStatus | None = None


Resource = AutoscalingRunnerSet | AutoscalingListener | EphemeralRunnerSet | EphemeralRunner

KINDS: dict[str, type[Resource]] = {
    KIND_AUTOSCALING_RUNNER_SET: AutoscalingRunnerSet,
    KIND_AUTOSCALING_LISTENER: AutoscalingListener,
    KIND_EPHEMERAL_RUNNER_SET: EphemeralRunnerSet,
    KIND_EPHEMERAL_RUNNER: EphemeralRunner,
}


class InvalidResourceError(ValueError):
    """An object that does not fit its kind; the message names each offending field path."""

    def __init__(self, *, kind: str, name: str, problems: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.name = name
        self.problems = problems
        detail = "; ".join(f"{path}: {message}" for path, message in problems)
        super().__init__(f"invalid {kind} {name}: {detail}")


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)[1:]


def _message(err: ErrorDetails) -> str:
    if err["type"] == "value_error" and "ctx" in err:
        return str(err["ctx"]["error"])
    return err["msg"]


def parse_resource(data: dict[str, Any]) -> Resource:
    """The model for a raw object of one of the four kinds, or InvalidResourceError."""
    kind = data.get("kind")
    metadata = data.get("metadata")
    name = ""
    if isinstance(metadata, dict):
        name = "/".join(str(metadata[k]) for k in ("namespace", "name") if metadata.get(k))
    name = name or "<unnamed>"
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InvalidResourceError(
            kind=str(kind),
            name=name,
            problems=[("kind", f"must be one of {', '.join(KINDS)}")],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [(_path(err["loc"]), _message(err)) for err in exc.errors()]
        raise InvalidResourceError(kind=str(kind), name=name, problems=problems) from None
