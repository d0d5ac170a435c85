"""Every setting of `gha-controller`: the process's flags (`ControllerSettings`), the
reconcilers' `GHA_CONTROLLER_*` variables (`RunnerSettings`), the in-cluster mode's variables
(`InClusterSettings`) and what they become for the in-cluster reconcilers
(`AutoscalingSettings`, `ListenerSettings`, `StandbyTimings`).

A setting that cannot work is a `ConfigError` whose message says what to fix in one line; the
process then exits 2 (`controller/app.py`). Reading argv and the environment is the composition
root's (`parse_settings`, `*_from_environment`); the reconcilers receive the settings built, in
`controller.deps.Deps`.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import re
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from importlib import metadata
from typing import Literal, NoReturn

from pydantic import AliasChoices, BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from controller.runners.backoff import FailurePolicy, ReplacementPolicy
from controller.runtime import Backoff, LeaseSettings, RuntimeSettings, WatchSettings
from shared.api.names import ENV_LISTENER_ENTRYPOINT

ENV_PREFIX = "GHA_CONTROLLER_"
DISTRIBUTION = "gha-runner-scaler"
LISTENER_COMMAND = "gha-listener"
"""The listener container's command by default: this project's listener."""


LISTENER_RESOURCES: dict[str, dict[str, str]] = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "1", "memory": "256Mi"},
}
"""The listener container's requests and limits by default (docs/autoscaling.md#the-listener-pod):
`gha-listener` serving one set holds 51.5 MB idle and 52.8 MB after a burst of 100 jobs, 64 MB
with 100 sets (`bench.listener_memory`); one core is all its event loop can use."""
_QUANTITY = re.compile(
    r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"
)


class ConfigError(Exception):
    """A setting that cannot work; the message says what to fix, in one line."""


class ControllerSettings(BaseModel):
    """Every setting of the process; each flag `--x-y` also reads `GHA_CONTROLLER_X_Y`."""

    model_config = {"extra": "forbid", "use_attribute_docstrings": True}

    watch_namespaces: list[str] = Field(default_factory=list)
    """Namespaces to watch (`--watch-namespace`, repeatable; comma-separated in the environment);
    empty watches all, which needs the ClusterRole's list/watch. With a set, every informer lists
    and watches only those namespaces, so namespaced Roles suffice and several controllers can
    split a cluster by namespace."""
    workers: int = Field(4, ge=1, le=256)
    """Concurrent reconciles per controller; ARC's single worker per kind is its bottleneck."""
    urgent_workers: int = Field(12, ge=0, le=256)
    """Workers of the EphemeralRunner controller kept for runners turning busy, besides
    `workers`: their pods are protected however long the other passes take (slow Actions
    calls, a backlog); 0 leaves them to the shared workers, ahead of the backlog."""
    leader_elect: bool = True
    """Elect a leader so that replicas can run side by side with one reconciling."""
    lease_name: str = "gha-runner-scale-set-controller"
    """The Lease that replicas compete for; ARC's name, so the two never lead at once."""
    lease_namespace: str = "default"
    """Where the Lease lives; usually the controller's own namespace."""
    lease_duration: float = Field(15.0, gt=0)
    """Seconds a follower waits after the last renewal it saw before taking over."""
    renew_deadline: float = Field(10.0, gt=0)
    """Seconds the leader keeps retrying a renewal before it stops leading."""
    retry_period: float = Field(2.0, gt=0)
    """Seconds between lease attempts."""
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}")
    """This replica's name in the Lease; unique per process so a restart is a new holder."""
    bind_address: str = ""
    """The address the metrics and probe servers listen on; empty (the default), 0.0.0.0 or ::
    is every IPv4 and IPv6 address, as ARC's `:8080`."""
    metrics_port: int = Field(8080, ge=1, le=65535)
    """Port of /metrics. A listener's default (:8090) is another, so both can share a host
    network."""
    health_port: int = Field(8081, ge=1, le=65535)
    """Port of /healthz and /readyz; equal to the metrics port, one server answers all three."""
    metrics_auth: bool = False
    """Serve /metrics only to a bearer token whose user RBAC lets `get` it, asked of the API
    server (TokenReview, SubjectAccessReview) as controller-runtime does; the probes stay open
    (docs/security.md#metrics)."""
    log_format: Literal["text", "json"] = "text"
    """text, or json with one object per line."""
    log_level: Literal["debug", "info", "warn", "warning", "error"] = "info"
    """debug, info, warn (or warning) or error."""
    kubeconfig: str | None = None
    """A kubeconfig file; without it (and without KUBECONFIG) the in-cluster identity is used."""
    context: str | None = None
    """The kubeconfig context to use; its current context without it."""
    request_timeout: float = Field(30.0, gt=0)
    """Seconds any API request may take."""
    watch_timeout: int = Field(300, ge=1)
    """timeoutSeconds of each watch request; the watch resumes after it."""
    watch_inactivity_timeout: float = Field(70.0, gt=0)
    """A watch silent this long (no event, no bookmark) is abandoned and resumed."""
    watch_retry_max: float = Field(30.0, ge=0.2)
    """Longest delay before an informer tries a failed list or watch again (from 0.2 s,
    doubling per failure in a row; it starts over once the server answers)."""
    backoff_base: float = Field(0.005, gt=0)
    """First delay before retrying a key whose reconcile failed; doubles per failure."""
    backoff_max: float = Field(300.0, gt=0)
    """Longest delay before retrying a failed key."""
    drain_timeout: float = Field(30.0, ge=0)
    """Seconds SIGTERM waits for in-flight reconciles before cancelling them."""

    @model_validator(mode="after")
    def _lease_order(self) -> ControllerSettings:
        if self.leader_elect and not (
            self.lease_duration > self.renew_deadline > self.retry_period
        ):
            raise ValueError("needs lease-duration > renew-deadline > retry-period")
        if self.backoff_max < self.backoff_base:
            raise ValueError("needs backoff-max >= backoff-base")
        if self.kubeconfig is not None and not os.path.isfile(self.kubeconfig):
            raise ValueError(f"kubeconfig {self.kubeconfig} is not a file")
        return self

    def runtime(self) -> RuntimeSettings:
        return RuntimeSettings(
            namespaces=frozenset(self.watch_namespaces) or None,
            workers=self.workers,
            urgent_workers=self.urgent_workers,
            backoff=Backoff(base=self.backoff_base, maximum=self.backoff_max),
            watch=WatchSettings(
                server_timeout=self.watch_timeout,
                inactivity_timeout=self.watch_inactivity_timeout,
                request_timeout=self.request_timeout,
                retry_max=self.watch_retry_max,
            ),
            leader_election=LeaseSettings(
                name=self.lease_name,
                namespace=self.lease_namespace,
                lease_duration=self.lease_duration,
                renew_deadline=self.renew_deadline,
                retry_period=self.retry_period,
            )
            if self.leader_elect
            else None,
            identity=self.identity,
            drain_timeout=self.drain_timeout,
            request_timeout=self.request_timeout,
            metrics_auth=self.metrics_auth,
        )


class RunnerSettings(BaseSettings):
    """Settings of the reconcilers (environment variables prefixed `GHA_CONTROLLER_`, e.g.
    `GHA_CONTROLLER_MAX_POD_FAILURES=8`): the runner reconcilers' rules, the Actions clients'
    credentials, the labels never propagated."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True)

    max_pod_failures: int = Field(default=5, ge=0)
    """Failed pods an idle runner may have before it is marked Failed (ARC: 5, hard-wired; node
    consolidation alone exhausted it for users: docs/reconcilers.md#failed-runners)."""
    pod_failure_backoff_seconds: float = Field(default=5.0, ge=0)
    """Wait before the pod after the first failure; doubles per failure (ARC: 5 s)."""
    pod_failure_backoff_max_seconds: float = Field(default=80.0, ge=0)
    """Cap of that wait (ARC's table ends at 80 s)."""
    pod_start_timeout_seconds: float = Field(default=600.0, ge=0)
    """How long the runner container may wait on its image (ErrImagePull, ImagePullBackOff...)
    or configuration before the pod counts as failed; 0 waits forever (ARC)."""
    failed_runner_replace_delay_seconds: float = Field(default=10.0, ge=0)
    """How long a Failed runner keeps its slot (visible for inspection) before it is replaced;
    ARC never replaces it, so failed runners held capacity forever."""
    failed_runner_replace_delay_max_seconds: float = Field(default=600.0, ge=0)
    """Bound of that delay, which doubles for each failed replacement in a row, so a template
    that cannot work costs one attempt per slot per this many seconds."""
    job_still_running_retry_seconds: float = Field(default=30.0, gt=0)
    """When the service refuses to remove a busy runner, how long until asking again (ARC: 30 s)."""
    registration_removal_timeout_seconds: float = Field(default=0.0, ge=0)
    """How long a deleted runner waits for the service to stop reporting its job before it goes
    without being unregistered; 0 waits as long as it takes (ARC; upstream #4585 proposes a
    timeout)."""
    registration_timeout_seconds: float = Field(default=600.0, ge=0)
    """How long, from its creation, a runner may keep failing to register with an error that
    may pass (5xx, 429, timeout, no connection) before it is marked Failed; 0 retries as long as
    it takes (ARC). An error a human must fix (scale set not found, credentials missing or
    refused) fails the runner at once: docs/reconcilers.md#registration-failures."""
    missing_credentials_removal_timeout_seconds: float = Field(default=120.0, gt=0)
    """How long a deleted runner waits for usable GitHub credentials (its config Secret gone,
    unusable or refused) to unregister itself before its registration finalizer is dropped and
    the runner is left registered on GitHub (reported by an Event and a metric)."""
    allow_insecure_github: bool = False
    """Accept a plain http:// `githubConfigUrl` off loopback (a test GitHub Enterprise Server):
    its credentials then cross the network in clear (docs/security.md#transport). Off, such a
    spec is refused with a condition and an Event naming the field."""
    quota_retry_seconds: float = Field(default=30.0, gt=0)
    """Retry delay when a pod is refused by a ResourceQuota (ARC: 30 s)."""
    quota_give_up_seconds: float = Field(default=600.0, gt=0)
    """A runner still refused by a quota after this long (from its creation) is deleted."""
    credentials_ttl_seconds: float = Field(default=300.0, gt=0)
    """How long the GitHub config Secret read for an Actions client is trusted."""
    protect_busy_pods: bool = True
    """While a runner is busy, annotate its pod `karpenter.sh/do-not-disrupt: "true"` and
    `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` and label it for its set's
    PodDisruptionBudget, which each set owns: node consolidation empties idle nodes first, and
    a drain evicts idle runners and waits for busy ones (not in ARC:
    docs/reconcilers.md#busy-pods)."""
    exclude_label_propagation_prefixes: tuple[str, ...] = ()
    """Label key prefixes never copied onto runners (ARC's --exclude-label-propagation-prefix)."""

    def failure_policy(self) -> FailurePolicy:
        return FailurePolicy(
            max_pod_failures=self.max_pod_failures,
            first_backoff=timedelta(seconds=self.pod_failure_backoff_seconds),
            max_backoff=timedelta(seconds=self.pod_failure_backoff_max_seconds),
            start_timeout=timedelta(seconds=self.pod_start_timeout_seconds)
            if self.pod_start_timeout_seconds
            else None,
        )

    def replacement_policy(self) -> ReplacementPolicy:
        return ReplacementPolicy(
            first_delay=timedelta(seconds=self.failed_runner_replace_delay_seconds),
            max_delay=timedelta(seconds=self.failed_runner_replace_delay_max_seconds),
        )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="gha-controller",
        description="Reconcile AutoscalingRunnerSets, listeners, EphemeralRunnerSets and "
        "EphemeralRunners.",
        epilog="`gha-controller migrate-from-arc --help`: hand a cluster over from ARC.",
    )
    p.add_argument(
        "--version", action="version", version=f"%(prog)s {metadata.version(DISTRIBUTION)}"
    )
    for name, field in ControllerSettings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_text = _help(name, field)
        if field.annotation is bool:
            p.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
        elif name == "watch_namespaces":
            p.add_argument(
                "--watch-namespace",
                dest=name,
                action="append",
                default=None,
                metavar="NAMESPACE",
                help=help_text,
            )
        else:
            p.add_argument(flag, dest=name, default=None, help=help_text)
    return p


def _help(name: str, field: FieldInfo) -> str:
    """A flag's help: the field's docstring, its default and its environment variable, so the
    settings are described in one place (the docstrings above)."""
    if field.default_factory is not None or field.default in (None, ""):
        default = ""
    else:
        default = f" Default: {field.default}."
    # argparse formats help with %; a docstring's own % must stay literal.
    text = (field.description or "").replace("%", "%%")
    return f"{text}{default} Environment: {ENV_PREFIX}{name.upper()}."


def parse_settings(argv: Sequence[str], environ: dict[str, str]) -> ControllerSettings:
    """Flags win over `GHA_CONTROLLER_*` variables, which win over defaults."""
    args = vars(_parser().parse_args(list(argv)))
    values: dict[str, object] = {}
    for name in ControllerSettings.model_fields:
        env = environ.get(ENV_PREFIX + name.upper())
        if args.get(name) is not None:
            values[name] = args[name]
        elif env is not None:
            values[name] = [n for n in env.split(",") if n] if name == "watch_namespaces" else env
    if "kubeconfig" not in values and environ.get("KUBECONFIG"):
        values["kubeconfig"] = environ["KUBECONFIG"]
    try:
        return ControllerSettings.model_validate(values)
    except ValidationError as exc:
        raise _one_line(exc, lambda loc: ".".join(loc).replace("_", "-")) from None


def runner_settings_from_environment() -> RunnerSettings:
    """`RunnerSettings` from `GHA_CONTROLLER_*`; a bad value is a ConfigError naming the variable
    and what is wrong with it, in one line."""
    try:
        return RunnerSettings()
    except ValidationError as exc:
        raise _one_line(exc, lambda loc: ENV_PREFIX + "_".join(loc).upper()) from None


def _one_line(exc: ValidationError, name: Callable[[list[str]], str]) -> ConfigError:
    """The first validation error as `<setting>: <what is wrong>`, the setting named by `name`
    from the error's location (a flag, an environment variable)."""
    first = exc.errors()[0]
    where = name([str(part) for part in first["loc"]])
    message = first["msg"].removeprefix("Value error, ")
    return ConfigError(f"{where}: {message}" if where else message)


class InClusterSettings(BaseSettings):
    """What the AutoscalingRunnerSet and AutoscalingListener reconcilers need, from the
    environment: ARC's two variables (set in the Deployment from the downward API and the
    image), then `GHA_CONTROLLER_LISTENER_*`. Without the first two the in-cluster mode is off
    and only EphemeralRunnerSets are reconciled (the docker-run listener path)."""

    model_config = SettingsConfigDict(frozen=True, populate_by_name=True)

    controller_namespace: str = Field(
        default="",
        validation_alias=AliasChoices(
            "CONTROLLER_MANAGER_POD_NAMESPACE", "GHA_CONTROLLER_CONTROLLER_NAMESPACE"
        ),
    )
    """Where listeners, their pods, ServiceAccounts and config Secrets are made."""
    listener_image: str = Field(
        default="",
        validation_alias=AliasChoices(
            "CONTROLLER_MANAGER_CONTAINER_IMAGE", "GHA_CONTROLLER_LISTENER_IMAGE"
        ),
    )
    """The image listener pods run: this project's, whose `gha-listener` is the listener."""
    listener_entrypoint: str = Field(
        default=LISTENER_COMMAND, validation_alias=ENV_LISTENER_ENTRYPOINT
    )
    """The listener container's command (ARC's variable; ARC's default is its `/ghalistener`)."""
    listener_image_pull_secrets: list[str] = Field(
        default_factory=list, validation_alias="GHA_CONTROLLER_LISTENER_IMAGE_PULL_SECRETS"
    )
    """Pull secrets of listener pods (ARC's `--auto-scaler-image-pull-secrets`), a JSON list."""
    listener_metrics_addr: str = Field(
        default=":8090", validation_alias="GHA_CONTROLLER_LISTENER_METRICS_ADDR"
    )
    """Where each listener serves /metrics, /healthz and /readyz; "0" turns metrics off (and
    the probes with them). Not the controller's 8080, so listener pods and the controller can
    share a host network; ARC's listener pods use `:8080`."""
    listener_resources: dict[str, dict[str, str]] = Field(
        default_factory=lambda: copy.deepcopy(LISTENER_RESOURCES),
        validation_alias="GHA_CONTROLLER_LISTENER_RESOURCES",
    )
    """The listener container's `resources` (a JSON object of `requests` and `limits`); `{}`
    leaves them unset. A template's `resources` replaces them for its listener."""
    trust_listener_templates: bool = Field(
        default=False, validation_alias="GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES"
    )
    """Make listener pods from any `listenerTemplate`, as ARC does: whoever may write an
    AutoscalingRunnerSet may then run any image, command, volume or security context in the
    controller's namespace, next to every listener's credentials (docs/security.md#listener-pod).
    Off: a template may set only labels, annotations, scheduling, and the listener container's
    resources and env."""
    listener_metrics_endpoint: str = Field(
        default="/metrics", validation_alias="GHA_CONTROLLER_LISTENER_METRICS_ENDPOINT"
    )
    listener_log_level: Literal["debug", "info", "warn", "error"] = Field(
        default="info", validation_alias="GHA_CONTROLLER_LISTENER_LOG_LEVEL"
    )
    listener_log_format: Literal["text", "json"] = Field(
        default="json", validation_alias="GHA_CONTROLLER_LISTENER_LOG_FORMAT"
    )
    listener_standby_lease_duration_seconds: float = Field(
        default=15.0,
        gt=0,
        validation_alias="GHA_CONTROLLER_LISTENER_STANDBY_LEASE_DURATION_SECONDS",
    )
    """For sets with `listenerReplicas` above 1: how long a standby listener waits after the
    last renewal of the Lease it saw before it takes over."""
    listener_standby_renew_deadline_seconds: float = Field(
        default=10.0,
        gt=0,
        validation_alias="GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS",
    )
    """How long the listener holding the Lease keeps trying to renew it before it stops."""
    listener_standby_retry_period_seconds: float = Field(
        default=2.0, gt=0, validation_alias="GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS"
    )
    """How often the Lease is renewed, and a standby tries to take it."""

    @model_validator(mode="after")
    def _standby_order(self) -> InClusterSettings:
        # The listener refuses any other order at start; checked here so that no listener is
        # ever given a config it would exit 2 on.
        if not (
            self.listener_standby_lease_duration_seconds
            > self.listener_standby_renew_deadline_seconds
            > self.listener_standby_retry_period_seconds
        ):
            raise ValueError(
                "GHA_CONTROLLER_LISTENER_STANDBY_LEASE_DURATION_SECONDS > "
                "GHA_CONTROLLER_LISTENER_STANDBY_RENEW_DEADLINE_SECONDS > "
                "GHA_CONTROLLER_LISTENER_STANDBY_RETRY_PERIOD_SECONDS is required"
            )
        return self

    @model_validator(mode="after")
    def _resources(self) -> InClusterSettings:
        for part, values in self.listener_resources.items():
            if part not in ("requests", "limits"):
                raise ValueError(
                    f"GHA_CONTROLLER_LISTENER_RESOURCES: {part!r} is not requests or limits"
                )
            for resource, quantity in values.items():
                if not _QUANTITY.match(quantity):
                    raise ValueError(
                        f"GHA_CONTROLLER_LISTENER_RESOURCES: {part}.{resource} {quantity!r} "
                        "is not a Kubernetes quantity (say 100m, 64Mi)"
                    )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.controller_namespace and self.listener_image)

    def autoscaling(self, runner: RunnerSettings) -> AutoscalingSettings:
        """What the AutoscalingRunnerSet reconciler is given."""
        return AutoscalingSettings(
            controller_namespace=self.controller_namespace,
            listener_image=self.listener_image,
            image_pull_secrets=tuple(self.listener_image_pull_secrets),
            excluded_label_prefixes=tuple(runner.exclude_label_propagation_prefixes),
        )

    def listener(self, runner: RunnerSettings, *, metrics_auth: bool = False) -> ListenerSettings:
        """What the AutoscalingListener reconciler is given; `metrics_auth`: the controller's
        `--metrics-auth`, which its listeners follow."""
        return ListenerSettings(
            metrics_addr="" if self.listener_metrics_addr == "0" else self.listener_metrics_addr,
            metrics_endpoint=self.listener_metrics_endpoint,
            log_level=self.listener_log_level,
            log_format=self.listener_log_format,
            entrypoint=self.listener_entrypoint,
            controller_namespace=self.controller_namespace,
            resources=self.listener_resources,
            trust_templates=self.trust_listener_templates,
            allow_insecure_github=runner.allow_insecure_github,
            metrics_auth=metrics_auth,
            standby=StandbyTimings(
                lease_duration_seconds=self.listener_standby_lease_duration_seconds,
                renew_deadline_seconds=self.listener_standby_renew_deadline_seconds,
                retry_period_seconds=self.listener_standby_retry_period_seconds,
            ),
        )


def in_cluster_settings_from_environment() -> InClusterSettings:
    try:
        return InClusterSettings()
    except ValidationError as exc:
        raise _one_line(exc, lambda loc: "_".join(loc).upper()) from None


@dataclasses.dataclass(frozen=True, slots=True)
class AutoscalingSettings:
    """What the in-cluster mode needs beyond the runner reconcilers' settings."""

    controller_namespace: str
    """Where listeners, their pods, ServiceAccounts and config Secrets live."""
    listener_image: str
    """The image the listener pods run (this project's, `gha-listener`)."""
    image_pull_secrets: Sequence[str] = ()
    excluded_label_prefixes: Sequence[str] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class StandbyTimings:
    """The Lease's timings written into the config of standby listeners
    (docs/autoscaling.md#listener-standby)."""

    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class ListenerSettings:
    """What every listener pod is given (ARC's `--listener-metrics-addr` and friends)."""

    metrics_addr: str = ":8090"
    """Where the listener serves /metrics, /healthz and /readyz; "" or "0" turns metrics off."""
    metrics_endpoint: str = "/metrics"
    log_level: str = "info"
    log_format: str = "json"
    restart_backoff_seconds: float = 5.0
    restart_backoff_max_seconds: float = 300.0
    stable_seconds: float = 120.0
    """A listener ready this long is no longer crash-looping: its backoff starts again."""
    resync_seconds: float = 300.0
    """How often a settled listener, or one whose config was refused, is looked at again:
    Secrets, ConfigMaps and Roles are not watched, so a rotated or fixed credential or CA, or an
    edited Role, is picked up within this time."""
    entrypoint: str = LISTENER_COMMAND
    """The listener container's command (ARC's `LISTENER_ENTRYPOINT`)."""
    controller_namespace: str = ""
    """Where this controller's listeners live; listeners elsewhere (ARC's, left in its own
    namespace) are not reconciled. "" reconciles every namespace."""
    standby: StandbyTimings = dataclasses.field(default_factory=StandbyTimings)
    """The Lease timings given to listeners with standby replicas."""
    resources: Mapping[str, Mapping[str, str]] = dataclasses.field(
        default_factory=lambda: copy.deepcopy(LISTENER_RESOURCES)
    )
    """The listener container's requests and limits, unless its template sets its own."""
    trust_templates: bool = False
    """Make pods from any listenerTemplate (GHA_CONTROLLER_TRUST_LISTENER_TEMPLATES)."""
    allow_insecure_github: bool = False
    """Written into each listener's config as `allow_insecure_github`: the controller's opt-in
    to plain http GitHub URLs off loopback (GHA_CONTROLLER_ALLOW_INSECURE_GITHUB) holds for the
    listeners it runs too."""
    metrics_auth: bool = False
    """Written into each listener's config as `metrics_auth`: with the controller's
    `--metrics-auth` its listeners serve /metrics only to authorized scrapers too."""
