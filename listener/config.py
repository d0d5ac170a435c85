"""The listener's settings: ARC's listener config file, overridable by environment variables.
The model itself (the keys and their validation) is `shared.listenerconfig.ListenerSettings`.

ARC's controller writes a JSON file (snake_case keys) and points `LISTENER_CONFIG_PATH` at it;
every key can also come from a `LISTENER_<KEY>` variable (the name in any case; objects and
lists as JSON), which wins over the file, so a `docker run` user can keep a secret out of the
file; the two secrets can also be read from a file
named by `LISTENER_<KEY>_FILE`, so they do not show in the container's environment either. Keys
after `metrics` are this project's additions; ARC's controller never writes them and their
defaults keep ARC's behaviour or better.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.listenerconfig import (
    MAX_INT32,
    ListenerSettings,
    LogLevel,
    MetricsConfig,
    MetricSpec,
    SettingsError,
)
from shared.wire import DecodeError, TooLarge, decode_json, read_file_capped

__all__ = [
    "CONFIG_PATH_VARIABLE",
    "ENV_PREFIX",
    "MAX_INT32",
    "SECRET_FILE_KEYS",
    "ConfigError",
    "ListenerSettings",
    "LoadedConfig",
    "LogLevel",
    "MetricSpec",
    "MetricsConfig",
    "environment_values",
    "load_all_settings",
    "load_settings",
    "read_config_file",
    "read_secret_files",
]

ENV_PREFIX = "LISTENER_"
CONFIG_PATH_VARIABLE = "LISTENER_CONFIG_PATH"
# The secrets a `LISTENER_<KEY>_FILE` variable may name a file for (Docker's `_FILE` convention).
SECRET_FILE_KEYS = ("github_token", "github_app_private_key")
MAX_CONFIG_BYTES = 2**20
"""The cap on a config file: ARC's controller writes it into a Secret, whose data Kubernetes
caps at 1 MiB; a config with an App's private key is a few KiB."""


class ConfigError(Exception):
    """The configuration cannot be used; the message says what to fix and holds no secret."""


def read_config_file(path: str) -> dict[str, Any]:
    """The JSON object in the config file, without its null values (null means "default")."""
    try:
        raw = read_file_capped(path, limit=MAX_CONFIG_BYTES, what=path)
        data = decode_json(raw, limit=MAX_CONFIG_BYTES, what=path)
    except OSError as exc:
        raise ConfigError(f"cannot read {CONFIG_PATH_VARIABLE} {path}: {exc.strerror}") from None
    except DecodeError as exc:
        # shared.wire's message names the position, never the text (which may hold a secret).
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return {key: value for key, value in data.items() if value is not None}


STRUCTURED_KEYS = ListenerSettings.structured_keys()
"""Keys whose `LISTENER_<KEY>` value is JSON (objects and lists); the others' is the text."""


def environment_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `LISTENER_<KEY>` overrides in `environ`, the variable's name in any case (as
    pydantic-settings, which read them before, matched it), or ConfigError for a structured key
    whose value is not JSON. The model validates the values, as it validates the file's."""
    by_name = {name.upper(): value for name, value in environ.items()}
    values: dict[str, Any] = {}
    for key in ListenerSettings.key_names():
        variable = f"{ENV_PREFIX}{key.upper()}"
        if variable not in by_name:
            continue
        value = by_name[variable]
        if key not in STRUCTURED_KEYS:
            values[key] = value
            continue
        try:
            values[key] = decode_json(value, limit=MAX_CONFIG_BYTES, what=variable)
        except DecodeError as exc:
            raise ConfigError(str(exc)) from None
    return values


@dataclass(frozen=True)
class LoadedConfig:
    settings: ListenerSettings
    ignored_keys: list[str]


def read_secret_files(environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets named by `LISTENER_<KEY>_FILE` variables, each file's text without the
    surrounding whitespace (an editor's or `echo`'s final newline)."""
    values = {}
    for key in SECRET_FILE_KEYS:
        variable = f"{ENV_PREFIX}{key.upper()}"
        path = environ.get(f"{variable}_FILE")
        if not path:
            continue
        if environ.get(variable):
            raise ConfigError(f"{variable} and {variable}_FILE are both set: keep one")
        try:
            raw = read_file_capped(path, limit=MAX_CONFIG_BYTES, what=f"{variable}_FILE {path}")
            value = raw.decode("utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read {variable}_FILE {path}: {exc.strerror}") from None
        except TooLarge as exc:
            raise ConfigError(str(exc)) from None
        except UnicodeDecodeError:
            raise ConfigError(f"{variable}_FILE {path} is not UTF-8 text") from None
        if not value:
            raise ConfigError(f"{variable}_FILE {path} is empty")
        values[key] = value
    return values


def load_settings() -> LoadedConfig:
    """The validated settings from the config file, the environment and the secret files named
    in it, or ConfigError."""
    path = os.environ.get(CONFIG_PATH_VARIABLE)
    return _load(read_config_file(path) if path else {})


def _load(file_values: dict[str, Any], *, source: str = "") -> LoadedConfig:
    # The environment wins over the file; a secret file stands for its variable.
    values = {**file_values, **environment_values(os.environ), **read_secret_files(os.environ)}
    try:
        settings = ListenerSettings.from_values(values)
    except SettingsError as exc:
        # Each problem names its key and what is wrong, never the value.
        prefix = f"{source}: " if source else ""
        raise ConfigError(prefix + str(exc)) from None
    ignored = sorted(set(file_values) - set(ListenerSettings.key_names()))
    return LoadedConfig(settings=settings, ignored_keys=ignored)


PROCESS_KEYS = (
    "metrics_addr",
    "metrics_endpoint",
    "metrics_auth",
    "log_level",
    "log_format",
    "library_log_level",
)
"""Settings of the process rather than of a scale set: every config of a directory must agree."""


def load_all_settings() -> list[LoadedConfig]:
    """One scale set's settings, or, when `LISTENER_CONFIG_PATH` names a directory, one per
    `*.json` file in it (docs/listener.md, "Many scale sets in one process"); ConfigError when
    any is invalid, none is there, two name the same EphemeralRunnerSet or standby Lease, or they
    disagree on a process setting."""
    path = os.environ.get(CONFIG_PATH_VARIABLE)
    if not path or not Path(path).is_dir():
        return [load_settings()]
    files = sorted(Path(path).glob("*.json"))
    if not files:
        raise ConfigError(f"{CONFIG_PATH_VARIABLE} {path} is a directory without *.json files")
    loaded = [_load(read_config_file(str(file)), source=file.name) for file in files]
    first = loaded[0].settings
    seen: dict[tuple[str, str], str] = {}
    leases: dict[tuple[str, str], str] = {}
    for file, config in zip(files, loaded, strict=True):
        settings = config.settings
        for key in PROCESS_KEYS:
            if getattr(settings, key) != getattr(first, key):
                raise ConfigError(
                    f"{file.name}: {key} differs from {files[0].name}'s; the scale sets of one "
                    "process share it"
                )
        target = (settings.ephemeral_runner_set_namespace, settings.ephemeral_runner_set_name)
        if target in seen:
            raise ConfigError(
                f"{file.name} and {seen[target]} both scale EphemeralRunnerSet "
                f"{target[0]}/{target[1]}"
            )
        seen[target] = file.name
        # Two sets on one Lease: one holder for both, and the other set never listens.
        lease = (settings.ephemeral_runner_set_namespace, settings.standby_lease_name)
        if lease[1] and lease in leases:
            raise ConfigError(
                f"{file.name} and {leases[lease]} both stand by on Lease {lease[0]}/{lease[1]}; "
                "each scale set needs its own"
            )
        leases[lease] = file.name
    return loaded
