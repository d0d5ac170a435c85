"""ARC's listener config as a model: the keys ARC's controller writes (snake_case, its order)
and this project's additions, validated as `gha-listener` validates them.

It lives in `shared` so that the controller validates each listener config it writes with the
very model the listener loads it with (docs/autoscaling.md): a config the controller writes can
never be one the listener refuses. Reading the file, the `LISTENER_*` overrides and the secret
files stay with the listener (listener/config.py).

A frozen dataclass checked when made, not a pydantic model: the listener leaves pydantic out of
its memory (docs/listener.md#memory). Each key converts as pydantic's lax mode converted it (an
integer from "5", a boolean from "true"...) and is refused in pydantic's words ("min_runners:
Input should be greater than or equal to 0"), never quoting the value; a `scaling_policy` alone
is validated by its pydantic model (shared/policy.py), imported only then.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, get_args

from shared.actions.config import GitHubConfig, insecure_url_refusal, parse_config_url
from shared.actions.errors import InvalidArgument
from shared.actions.transport import ssl_context
from shared.actions.wiremodel import SecretStr

if TYPE_CHECKING:
    from shared.policy import ScalingPolicy

MAX_INT32 = 2**31 - 1
# Go's listen address forms: ":port", "host:port", "[ipv6]:port".
_ADDRESS = re.compile(r"(?:\[(?P<ipv6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>[0-9]{1,5})")
_DISABLED = ("", "0")
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})

LogLevel = Literal["debug", "info", "warn", "error"]
LogFormat = Literal["text", "json"]


class SettingsError(ValueError):
    """The values cannot make settings; `problems` are "key: what is wrong" (or the rule
    between keys that fails), never a value."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Refused(Exception):
    def __init__(self, where: str, why: str) -> None:
        self.where = where
        self.why = why


def _string(value: object, where: str) -> str:
    if isinstance(value, str):
        return value
    raise _Refused(where, "Input should be a valid string")


def _secret(value: object, where: str) -> SecretStr:
    return value if isinstance(value, SecretStr) else SecretStr(_string(value, where))


def _integer(value: object, where: str) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _Refused(
            where, "Input should be a valid integer, got a number with a fractional part"
        )
    if isinstance(value, str):
        if _INTEGER.fullmatch(value) and len(value) <= 4300:
            return int(value)
        raise _Refused(
            where, "Input should be a valid integer, unable to parse string as an integer"
        )
    raise _Refused(where, "Input should be a valid integer")


def _number(value: object, where: str) -> float:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise _Refused(
                where, "Input should be a valid number, unable to parse string as a number"
            ) from None
    raise _Refused(where, "Input should be a valid number")


def _boolean(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Refused(where, "Input should be a valid boolean, unable to interpret input")


def _literal(*choices: str) -> Callable[[object, str], str]:
    allowed = ", ".join(f"'{choice}'" for choice in choices[:-1]) + f" or '{choices[-1]}'"

    def convert(value: object, where: str) -> str:
        # ARC and people write "INFO" as often as "info".
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        raise _Refused(where, f"Input should be {allowed}")

    return convert


_log_level = _literal(*get_args(LogLevel))
_log_format = _literal(*get_args(LogFormat))


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list | tuple):
        raise _Refused(where, "Input should be a valid list")
    return [_string(item, f"{where}.{index}") for index, item in enumerate(value)]


def _app_id(value: object, where: str) -> str:
    # Older ARC releases wrote the App ID as a JSON number.
    return (
        str(value)
        if isinstance(value, int) and not isinstance(value, bool)
        else _string(value, where)
    )


def _object(value: object, where: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise _Refused(where, "Input should be a valid dictionary")


@dataclass(frozen=True)
class MetricSpec:
    labels: list[str] = field(default_factory=list)
    buckets: list[float] | None = None

    def __post_init__(self) -> None:
        # Bounds given as integers are floats, as a bound read from JSON is: `le="60.0"`.
        if self.buckets is not None:
            object.__setattr__(self, "buckets", [float(bound) for bound in self.buckets])


@dataclass(frozen=True)
class MetricsConfig:
    """ARC's `metrics` key: which gha_* metrics to export, with which labels and buckets."""

    counters: dict[str, MetricSpec] = field(default_factory=dict)
    gauges: dict[str, MetricSpec] = field(default_factory=dict)
    histograms: dict[str, MetricSpec] = field(default_factory=dict)


def _metric_spec(value: object, where: str) -> MetricSpec:
    if isinstance(value, MetricSpec):
        return value
    if not isinstance(value, dict):
        raise _Refused(where, "Input should be a valid dictionary or instance of MetricSpec")
    buckets = value.get("buckets")
    return MetricSpec(
        labels=_strings(value.get("labels", []), f"{where}.labels"),
        buckets=None
        if buckets is None
        else [
            _number(item, f"{where}.buckets.{i}") for i, item in enumerate(_list(buckets, where))
        ],
    )


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise _Refused(f"{where}.buckets", "Input should be a valid list")
    return list(value)


def _metrics(value: object, where: str) -> MetricsConfig | None:
    if value is None or isinstance(value, MetricsConfig):
        return value
    if not isinstance(value, dict):
        raise _Refused(where, "Input should be a valid dictionary or instance of MetricsConfig")
    families = {}
    for family in ("counters", "gauges", "histograms"):
        specs = value.get(family, {})
        if not isinstance(specs, dict):
            raise _Refused(f"{where}.{family}", "Input should be a valid dictionary")
        families[family] = {
            name: _metric_spec(spec, f"{where}.{family}.{name}") for name, spec in specs.items()
        }
    return MetricsConfig(**families)


def _policy(value: object, where: str) -> ScalingPolicy | None:
    if value is None:
        return None
    # Imported only for a policy: pydantic is about 12 MB of the listener's memory.
    from pydantic import ValidationError

    from shared.policy import ScalingPolicy

    try:
        return ScalingPolicy.model_validate(value)
    except ValidationError as exc:
        problems = [
            ": ".join(
                (
                    ".".join(str(part) for part in (where, *error["loc"])),
                    str(error["msg"]).removeprefix("Value error, "),
                )
            )
            for error in exc.errors(include_input=False, include_url=False)
        ]
        where, _, why = "; ".join(problems).partition(": ")
        raise _Refused(where, why) from None


def setting(
    convert: Callable[[Any, str], Any],
    *,
    description: str,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
) -> dict[str, Any]:
    """The metadata of one key: how its value converts, its bounds, and what `--help` says."""
    return {
        "convert": convert,
        "description": description,
        "bounds": [
            (bound, test, words)
            for bound, test, words in (
                (ge, lambda v, b: v >= b, "greater than or equal to"),
                (gt, lambda v, b: v > b, "greater than"),
                (le, lambda v, b: v <= b, "less than or equal to"),
            )
            if bound is not None
        ],
        "max_length": max_length,
        "pattern": None if pattern is None else re.compile(pattern),
    }


def _bounded(value: Any, meta: Mapping[str, Any], where: str) -> None:
    for bound, test, words in meta["bounds"]:
        if (isinstance(value, float) and math.isnan(value)) or not test(value, bound):
            raise _Refused(where, f"Input should be {words} {bound}")
    if meta["max_length"] is not None and len(value) > meta["max_length"]:
        raise _Refused(where, f"String should have at most {meta['max_length']} characters")
    if meta["pattern"] is not None and not meta["pattern"].search(value):
        raise _Refused(where, f"String should match pattern '{meta['pattern'].pattern}'")


@dataclass(frozen=True, init=False)
class ListenerSettings:
    """One scale set's settings, checked when made (SettingsError). The model reads no
    environment: the listener merges its `LISTENER_*` overrides into the values
    (listener/config.py), and the controller validates the configs it writes with nothing of
    its own environment in them. `ListenerSettings(**values)` takes each key as JSON or a
    `LISTENER_*` variable gives it (a token as a str, a count as "5"), as the pydantic model did."""

    configure_url: str = field(
        default="",
        metadata=setting(_string, description="GitHub URL of the enterprise, org or repository"),
    )
    github_token: SecretStr = field(
        default=SecretStr(""),
        metadata=setting(_secret, description="PAT; or the three App keys"),
    )
    github_app_id: str = field(
        default="",
        metadata=setting(_app_id, description="GitHub App ID or client ID"),
    )
    github_app_installation_id: int = field(
        default=0,
        metadata=setting(_integer, ge=0, description="GitHub App installation ID"),
    )
    github_app_private_key: SecretStr = field(
        default=SecretStr(""),
        metadata=setting(_secret, description="App key (PEM)"),
    )
    vault_type: str = field(
        default="",
        metadata=setting(_string, description="ARC's Azure Key Vault lookup; rejected here"),
    )
    vault_lookup_key: str = field(
        default="",
        metadata=setting(_string, description="ARC's Key Vault secret name; rejected here"),
    )
    azure_key_vault: dict[str, Any] | None = field(
        default=None,
        metadata=setting(_object, description="ARC's Key Vault settings; rejected here"),
    )
    ephemeral_runner_set_namespace: str = field(
        default="",
        metadata=setting(_string, description="namespace of the set we scale"),
    )
    ephemeral_runner_set_name: str = field(
        default="",
        metadata=setting(_string, description="the EphemeralRunnerSet we scale"),
    )
    runner_scale_set_id: int = field(
        default=0,
        metadata=setting(_integer, ge=0, description="0: look up or register by name"),
    )
    runner_scale_set_name: str = field(
        default="",
        metadata=setting(_string, description="scale set name, used when id is 0"),
    )
    min_runners: int = field(
        default=0,
        metadata=setting(_integer, ge=0, le=MAX_INT32, description="runners kept when idle"),
    )
    max_runners: int = field(
        default=MAX_INT32,
        metadata=setting(_integer, ge=0, le=MAX_INT32, description="ARC writes MaxInt32"),
    )
    server_root_ca: str = field(
        default="",
        metadata=setting(_string, description="PEM bundle trusted for GitHub (GHES)"),
    )
    log_level: LogLevel = field(
        default="info",
        metadata=setting(_log_level, description="debug, info, warn or error"),
    )
    log_format: LogFormat = field(
        default="text",
        metadata=setting(_log_format, description="text or json"),
    )
    # Not the controller's 8080, so the two can share a host network (README, docker run).
    metrics_addr: str = field(
        default=":8090",
        metadata=setting(
            _string, description='[host]:port of /metrics, /healthz, /readyz; "" or "0": off'
        ),
    )
    metrics_endpoint: str = field(
        default="/metrics",
        metadata=setting(_string, description='"" only when metrics_addr is off'),
    )
    metrics: MetricsConfig | None = field(
        default=None,
        metadata=setting(_metrics, description="null: ARC's default metric set"),
    )

    runner_group: str = field(
        default="",
        metadata=setting(_string, description="runner group for lookup/registration by name"),
    )
    library_log_level: LogLevel = field(
        default="info",
        metadata=setting(
            _log_level,
            description="level of the libraries' loggers (Kubernetes and HTTP clients...), which "
            "log_level leaves at info",
        ),
    )
    runner_scale_set_labels: list[str] = field(
        default_factory=list,
        metadata=setting(_strings, description="extra labels when this listener registers the set"),
    )
    session_conflict_timeout_seconds: float = field(
        default=300.0,
        metadata=setting(
            _number,
            ge=0,
            description="how long to wait for another listener's session to go away (409) before "
            "giving up; ARC exits at once and crash-loops",
        ),
    )
    retry_initial_seconds: float = field(
        default=1.0,
        metadata=setting(
            _number, gt=0, description="first backoff after a transient Actions or Kubernetes error"
        ),
    )
    retry_max_seconds: float = field(
        default=30.0,
        metadata=setting(_number, gt=0, description="cap of that backoff"),
    )
    long_poll_timeout_seconds: float = field(
        default=70.0,
        metadata=setting(
            _number,
            gt=0,
            description="client timeout of one long poll (the service answers within ~50 s); "
            "/readyz fails when no poll finished within twice this",
        ),
    )
    kube_request_timeout_seconds: float = field(
        default=30.0,
        metadata=setting(_number, gt=0, description="timeout of each Kubernetes request"),
    )
    job_started_conflict_retries: int = field(
        default=5,
        metadata=setting(
            _integer,
            ge=1,
            description="re-reads of an EphemeralRunner after a 409 on its status patch",
        ),
    )
    job_started_concurrency: int = field(
        default=16,
        metadata=setting(
            _integer,
            ge=1,
            description="JobStarted messages of a batch written at once (one runner's in order)",
        ),
    )
    scaling_policy: ScalingPolicy | None = field(
        default=None,
        metadata=setting(
            _policy,
            description="capacity policies on top of min_runners and max_runners: minIdle, "
            "schedules, burst, warmTailSeconds, scaleDownDelaySeconds (docs/policies.md)",
        ),
    )

    allow_insecure_github: bool = field(
        default=False,
        metadata=setting(
            _boolean,
            description="accept a plain http:// configure_url off loopback (a test GitHub "
            "Enterprise Server); credentials then cross the network in clear",
        ),
    )
    metrics_auth: bool = field(
        default=False,
        metadata=setting(
            _boolean,
            description="serve the metrics path only to a bearer token whose user RBAC lets `get` "
            "it, asked of the API server (TokenReview, SubjectAccessReview) as controller-runtime "
            "does; the probes stay open (docs/security.md#metrics)",
        ),
    )
    standby_lease_name: str = field(
        default="",
        metadata=setting(
            _string,
            max_length=253,
            pattern=r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
            description="a coordination.k8s.io Lease in ephemeral_runner_set_namespace: replicas "
            "of this listener take turns holding the message session, one at a time "
            '(docs/listener.md#standby); "": one listener, no Lease, as ARC',
        ),
    )
    standby_lease_duration_seconds: float = field(
        default=15.0,
        metadata=setting(
            _number, gt=0, description="how long a standby waits after the holder's last renewal"
        ),
    )
    standby_renew_deadline_seconds: float = field(
        default=10.0,
        metadata=setting(
            _number,
            gt=0,
            description="how long the holder tries to renew before it stops listening",
        ),
    )
    standby_retry_period_seconds: float = field(
        default=2.0,
        metadata=setting(
            _number, gt=0, description="interval of renewals and of the standby's attempts"
        ),
    )

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self.key_names())
        if unknown:
            raise TypeError(f"ListenerSettings has no key {', '.join(sorted(unknown))}")
        problems = []
        for key in fields(self):
            if key.name in values:
                value = values[key.name]
            elif key.default_factory is not MISSING:
                value = key.default_factory()
            else:
                value = key.default
            try:
                converted = key.metadata["convert"](value, key.name)
                if converted is not None:
                    _bounded(converted, key.metadata, key.name)
                    converted = self._check(key.name, converted)
            except _Refused as refused:
                problems.append(f"{refused.where}: {refused.why}")
                continue
            except ValueError as exc:
                problems.append(f"{key.name}: {exc}")
                continue
            object.__setattr__(self, key.name, converted)
        if problems:
            raise SettingsError(problems)
        try:
            self._consistent()
        except ValueError as exc:
            raise SettingsError([str(exc)]) from None

    @classmethod
    def key_names(cls) -> list[str]:
        return [key.name for key in fields(cls)]

    @classmethod
    def structured_keys(cls) -> frozenset[str]:
        """The keys that hold an object or a list (a `LISTENER_<KEY>` value of these is JSON)."""
        structured = (_strings, _object, _metrics, _policy)
        return frozenset(key.name for key in fields(cls) if key.metadata["convert"] in structured)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> ListenerSettings:
        """The settings of `values`, unknown keys ignored (as ARC's listener ignores them)."""
        known = set(cls.key_names())
        return cls(**{key: value for key, value in values.items() if key in known})

    def _check(self, name: str, value: Any) -> Any:
        """The checks of single keys beyond their type and bounds (ValueError: what is wrong)."""
        if name == "configure_url" and value:
            parse_config_url(value)
        elif name == "metrics_addr" and value not in _DISABLED and _listen_address(value) is None:
            raise ValueError(
                f'expected "host:port", ":port", "[ipv6]:port", "0" or "" (disabled), got "{value}"'
            )
        elif name == "metrics_endpoint" and (
            value and (not value.startswith("/") or value in ("/healthz", "/readyz"))
        ):
            # ARC's controller writes "" next to an empty metrics_addr when metrics are off.
            raise ValueError('must be a path starting with "/" other than /healthz and /readyz')
        elif name == "server_root_ca" and value:
            try:
                ssl_context(value)
            except InvalidArgument as exc:
                raise ValueError(str(exc)) from None
        return value

    def _consistent(self) -> None:
        """The rules between keys, once every key is valid; ValueError names the first."""
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
