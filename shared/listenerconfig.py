"""ARC's listener config as a model: the keys ARC's controller writes (snake_case, its order)
and this project's additions, validated as `gha-listener` validates them.

It lives in `shared` so that the controller validates each listener config it writes with the
very model the listener loads it with (docs/autoscaling.md): a config the controller writes can
never be one the listener refuses. Reading the file, the `LISTENER_*` overrides and the secret
files stay with the listener (listener/config.py).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from shared.actions.config import GitHubConfig, insecure_url_refusal, parse_config_url
from shared.actions.errors import InvalidArgument
from shared.actions.transport import ssl_context
from shared.policy import ScalingPolicy

MAX_INT32 = 2**31 - 1
# Go's listen address forms: ":port", "host:port", "[ipv6]:port".
_ADDRESS = re.compile(r"(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>[0-9]{1,5})")
_DISABLED = ("", "0")

LogLevel = Literal["debug", "info", "warn", "error"]


class MetricSpec(BaseModel):
    labels: list[str] = Field(default_factory=list)
    buckets: list[float] | None = None


class MetricsConfig(BaseModel):
    """ARC's `metrics` key: which gha_* metrics to export, with which labels and buckets."""

    counters: dict[str, MetricSpec] = Field(default_factory=dict)
    gauges: dict[str, MetricSpec] = Field(default_factory=dict)
    histograms: dict[str, MetricSpec] = Field(default_factory=dict)


class ListenerSettings(BaseModel):
    """One scale set's settings. The model reads no environment: the listener merges its
    `LISTENER_*` overrides into the values (listener/config.py), and the controller validates
    the configs it writes with nothing of its own environment in them."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)

    configure_url: str = Field("", description="GitHub URL of the enterprise, org or repository")
    github_token: SecretStr = Field(SecretStr(""), description="PAT; or the three App keys")
    github_app_id: str = Field("", description="GitHub App ID or client ID")
    github_app_installation_id: int = Field(0, ge=0, description="GitHub App installation ID")
    github_app_private_key: SecretStr = Field(SecretStr(""), description="App key (PEM)")
    vault_type: str = Field("", description="ARC's Azure Key Vault lookup; rejected here")
    vault_lookup_key: str = Field("", description="ARC's Key Vault secret name; rejected here")
    azure_key_vault: dict[str, Any] | None = Field(
        None, description="ARC's Key Vault settings; rejected here"
    )
    ephemeral_runner_set_namespace: str = Field("", description="namespace of the set we scale")
    ephemeral_runner_set_name: str = Field("", description="the EphemeralRunnerSet we scale")
    runner_scale_set_id: int = Field(0, ge=0, description="0: look up or register by name")
    runner_scale_set_name: str = Field("", description="scale set name, used when id is 0")
    min_runners: int = Field(0, ge=0, le=MAX_INT32, description="runners kept when idle")
    max_runners: int = Field(MAX_INT32, ge=0, le=MAX_INT32, description="ARC writes MaxInt32")
    server_root_ca: str = Field("", description="PEM bundle trusted for GitHub (GHES)")
    log_level: LogLevel = Field("info", description="debug, info, warn or error")
    log_format: Literal["text", "json"] = Field("text", description="text or json")
    # Not the controller's 8080, so the two can share a host network (README, docker run).
    metrics_addr: str = Field(
        ":8090", description='[host]:port of /metrics, /healthz, /readyz; "" or "0": off'
    )
    metrics_endpoint: str = Field("/metrics", description='"" only when metrics_addr is off')
    metrics: MetricsConfig | None = Field(None, description="null: ARC's default metric set")

    runner_group: str = Field("", description="runner group for lookup/registration by name")
    library_log_level: LogLevel = Field(
        "info",
        description="level of the libraries' loggers (Kubernetes and HTTP clients...), which "
        "log_level leaves at info",
    )
    runner_scale_set_labels: list[str] = Field(
        default_factory=list, description="extra labels when this listener registers the set"
    )
    session_conflict_timeout_seconds: float = Field(
        300.0,
        ge=0,
        description="how long to wait for another listener's session to go away (409) before "
        "giving up; ARC exits at once and crash-loops",
    )
    retry_initial_seconds: float = Field(
        1.0, gt=0, description="first backoff after a transient Actions or Kubernetes error"
    )
    retry_max_seconds: float = Field(30.0, gt=0, description="cap of that backoff")
    long_poll_timeout_seconds: float = Field(
        70.0,
        gt=0,
        description="client timeout of one long poll (the service answers within ~50 s); "
        "/readyz fails when no poll finished within twice this",
    )
    kube_request_timeout_seconds: float = Field(
        30.0, gt=0, description="timeout of each Kubernetes request"
    )
    job_started_conflict_retries: int = Field(
        5, ge=1, description="re-reads of an EphemeralRunner after a 409 on its status patch"
    )
    job_started_concurrency: int = Field(
        16,
        ge=1,
        description="JobStarted messages of a batch written at once (one runner's in order)",
    )
    scaling_policy: ScalingPolicy | None = Field(
        None,
        description="capacity policies on top of min_runners and max_runners: minIdle, "
        "schedules, burst, warmTailSeconds, scaleDownDelaySeconds (docs/policies.md)",
    )

    allow_insecure_github: bool = Field(
        False,
        description="accept a plain http:// configure_url off loopback (a test GitHub "
        "Enterprise Server); credentials then cross the network in clear",
    )
    metrics_auth: bool = Field(
        False,
        description="serve the metrics path only to a bearer token whose user RBAC lets `get` "
        "it, asked of the API server (TokenReview, SubjectAccessReview) as controller-runtime "
        "does; the probes stay open (docs/security.md#metrics)",
    )
    standby_lease_name: str = Field(
        "",
        max_length=253,
        pattern=r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="a coordination.k8s.io Lease in ephemeral_runner_set_namespace: replicas of "
        "this listener take turns holding the message session, one at a time "
        '(docs/listener.md#standby); "": one listener, no Lease, as ARC',
    )
    standby_lease_duration_seconds: float = Field(
        15.0, gt=0, description="how long a standby waits after the holder's last renewal"
    )
    standby_renew_deadline_seconds: float = Field(
        10.0, gt=0, description="how long the holder tries to renew before it stops listening"
    )
    standby_retry_period_seconds: float = Field(
        2.0, gt=0, description="interval of renewals and of the standby's attempts"
    )

    @field_validator("configure_url")
    @classmethod
    def _config_url(cls, value: str) -> str:
        if value:
            parse_config_url(value)
        return value

    @field_validator("github_app_id", mode="before")
    @classmethod
    def _app_id_as_string(cls, value: object) -> object:
        # Older ARC releases wrote the App ID as a JSON number.
        return str(value) if isinstance(value, int) else value

    @field_validator("log_level", "log_format", "library_log_level", mode="before")
    @classmethod
    def _case_insensitive(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("metrics_addr")
    @classmethod
    def _address(cls, value: str) -> str:
        if value in _DISABLED:
            return value
        if _listen_address(value) is None:
            raise ValueError(
                f'expected "host:port", ":port", "[ipv6]:port", "0" or "" (disabled), got "{value}"'
            )
        return value

    @field_validator("metrics_endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        # ARC's controller writes "" next to an empty metrics_addr when metrics are off.
        if value and (not value.startswith("/") or value in ("/healthz", "/readyz")):
            raise ValueError('must be a path starting with "/" other than /healthz and /readyz')
        return value

    @field_validator("server_root_ca")
    @classmethod
    def _root_ca(cls, value: str) -> str:
        if value:
            try:
                ssl_context(value)
            except InvalidArgument as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ListenerSettings:
        if not self.configure_url:
            raise ValueError("GitHubConfigUrl is not provided (configure_url)")
        refusal = insecure_url_refusal(
            self.configure_url,
            field="configure_url",
            allowed=self.allow_insecure_github,
            opt_in="LISTENER_ALLOW_INSECURE_GITHUB (allow_insecure_github in the config file)",
        )
        if refusal:
            raise ValueError(refusal)
        if not self.ephemeral_runner_set_namespace or not self.ephemeral_runner_set_name:
            raise ValueError(
                "ephemeral_runner_set_namespace and ephemeral_runner_set_name are required"
            )
        if not self.runner_scale_set_id and not self.runner_scale_set_name:
            raise ValueError("runner_scale_set_id or runner_scale_set_name is required")
        if self.min_runners > self.max_runners:
            raise ValueError(
                f'MinRunners "{self.min_runners}" cannot be greater than '
                f'MaxRunners "{self.max_runners}"'
            )
        if self.scaling_policy is not None:
            problems = self.scaling_policy.bound_problems(
                min_runners=self.min_runners, max_runners=self.max_runners
            )
            if problems:
                raise ValueError("; ".join(f"scaling_policy.{problem}" for problem in problems))
        if self.metrics_listen is not None and not self.metrics_endpoint:
            raise ValueError("metrics_endpoint is required when metrics_addr is set")
        if self.standby_lease_name and not (
            self.standby_lease_duration_seconds
            > self.standby_renew_deadline_seconds
            > self.standby_retry_period_seconds
        ):
            raise ValueError(
                "standby_lease_duration_seconds > standby_renew_deadline_seconds > "
                "standby_retry_period_seconds is required"
            )
        if self.retry_initial_seconds > self.retry_max_seconds:
            raise ValueError("retry_initial_seconds cannot be greater than retry_max_seconds")
        self._check_credentials()
        return self

    def _check_credentials(self) -> None:
        if self.vault_type == "azure_key_vault":
            if not self.vault_lookup_key:
                raise ValueError(
                    'VaultLookupKey is required when VaultType is set to "azure_key_vault"'
                )
            raise ValueError(
                'vault_type "azure_key_vault" is not supported by gha-listener: give the GitHub '
                "credentials in the config file or in a file named by LISTENER_GITHUB_TOKEN_FILE "
                "(or LISTENER_GITHUB_APP_PRIVATE_KEY_FILE)"
            )
        if self.vault_type:
            raise ValueError(f'unknown vault type: "{self.vault_type}"')
        app_fields = {
            "github_app_id": bool(self.github_app_id),
            "github_app_installation_id": self.github_app_installation_id > 0,
            "github_app_private_key": bool(self.github_app_private_key.get_secret_value()),
        }
        has_token = bool(self.github_token.get_secret_value())
        if has_token and any(app_fields.values()):
            raise ValueError(
                "AppConfig validation failed: both PAT and GitHub App credentials provided. "
                "should only provide one"
            )
        if any(app_fields.values()) and not all(app_fields.values()):
            missing = ", ".join(name for name, present in app_fields.items() if not present)
            raise ValueError(f"AppConfig validation failed: GitHub App credentials lack {missing}")
        if not has_token and not any(app_fields.values()):
            raise ValueError(
                "AppConfig validation failed: no credentials provided: either a PAT or GitHub "
                "App credentials should be provided"
            )

    @property
    def github_config(self) -> GitHubConfig:
        return parse_config_url(self.configure_url)

    @property
    def metrics_listen(self) -> tuple[str, int] | None:
        """(host, port) of the telemetry server, or None when it is disabled."""
        if self.metrics_addr in _DISABLED:
            return None
        return _listen_address(self.metrics_addr)


def _listen_address(value: str) -> tuple[str, int] | None:
    """(host, port) of a Go listen address; an empty host is every address, IPv4 and IPv6
    (shared/listen.py)."""
    found = _ADDRESS.fullmatch(value)
    if found is None or int(found["port"]) > 65535:
        return None
    if found["ipv6"] is not None:
        try:
            ipaddress.IPv6Address(found["ipv6"])
        except ValueError:
            return None
        return found["ipv6"], int(found["port"])
    return found["host"], int(found["port"])
