"""Settings: ARC's config file keys, environment overrides, and one-line errors without secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from listener.config import MAX_INT32, ConfigError, load_settings

TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n-----END RSA PRIVATE KEY-----"

ARC_CONFIG: dict[str, Any] = {
    # The keys ARC's controller writes (docs/listener.md, "Configuration"), in its shape.
    "configure_url": "https://github.com/octo-org",
    "vault_type": "",
    "vault_lookup_key": "",
    "github_app_id": "",
    "github_app_installation_id": 0,
    "github_app_private_key": "",
    "github_token": TOKEN,
    "ephemeral_runner_set_namespace": "arc-runners",
    "ephemeral_runner_set_name": "arc-runner-set-7d9fb",
    "max_runners": 2147483647,
    "min_runners": 1,
    "runner_scale_set_id": 7,
    "runner_scale_set_name": "arc-runner-set",
    "server_root_ca": "",
    "log_level": "debug",
    "log_format": "json",
    "metrics_addr": ":8080",
    "metrics_endpoint": "/metrics",
    "metrics": None,
}


@pytest.fixture
def write_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("LISTENER_MIN_RUNNERS", "LISTENER_GITHUB_TOKEN", "LISTENER_MAX_RUNNERS"):
        monkeypatch.delenv(name, raising=False)

    def write(**changes: Any) -> Path:
        config = {**ARC_CONFIG, **changes}
        path = tmp_path / "config.json"
        path.write_text(json.dumps({k: v for k, v in config.items() if v is not ...}))
        monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
        return path

    return write


def test_arc_config_file_loads(write_config: Any) -> None:
    write_config()
    loaded = load_settings()
    settings = loaded.settings
    assert (settings.min_runners, settings.max_runners) == (1, MAX_INT32)
    assert settings.runner_scale_set_id == 7
    assert settings.github_token.get_secret_value() == TOKEN
    assert settings.metrics is None
    assert settings.metrics_listen == ("0.0.0.0", 8080)
    assert loaded.ignored_keys == []


def test_environment_overrides_the_file(write_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(github_token="")
    monkeypatch.setenv("LISTENER_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("LISTENER_MIN_RUNNERS", "3")
    settings = load_settings().settings
    assert settings.min_runners == 3
    assert settings.github_token.get_secret_value() == TOKEN


def test_unknown_file_keys_are_reported(write_config: Any) -> None:
    write_config(min_runner=2)
    assert load_settings().ignored_keys == ["min_runner"]


def test_app_id_number_from_older_arc_is_accepted(write_config: Any) -> None:
    write_config(
        github_token="",
        github_app_id=12345,
        github_app_installation_id=678,
        github_app_private_key=KEY,
    )
    assert load_settings().settings.github_app_id == "12345"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"configure_url": ""}, "GitHubConfigUrl is not provided"),
        ({"configure_url": "https://github.com"}, "configure_url: invalid config URL"),
        ({"ephemeral_runner_set_name": ""}, "ephemeral_runner_set_name are required"),
        (
            {"runner_scale_set_id": 0, "runner_scale_set_name": ""},
            "runner_scale_set_id or runner_scale_set_name is required",
        ),
        (
            {"min_runners": 5, "max_runners": 2},
            'MinRunners "5" cannot be greater than MaxRunners "2"',
        ),
        ({"max_runners": -1}, "max_runners: Input should be greater than or equal to 0"),
        ({"max_runners": MAX_INT32 + 1}, "max_runners: Input should be less than or equal to"),
        ({"github_token": ""}, "no credentials provided: either a PAT or GitHub App"),
        (
            {"github_app_id": "1", "github_app_installation_id": 2, "github_app_private_key": KEY},
            "both PAT and GitHub App credentials provided. should only provide one",
        ),
        (
            {"github_token": "", "github_app_id": "1", "github_app_installation_id": 2},
            "GitHub App credentials lack github_app_private_key",
        ),
        ({"vault_type": "hashicorp"}, 'unknown vault type: "hashicorp"'),
        (
            {"vault_type": "azure_key_vault"},
            'VaultLookupKey is required when VaultType is set to "azure_key_vault"',
        ),
        (
            {"vault_type": "azure_key_vault", "vault_lookup_key": "k"},
            'vault_type "azure_key_vault" is not supported',
        ),
        ({"log_level": "verbose"}, "log_level: Input should be 'debug', 'info', 'warn' or 'error'"),
        ({"log_level": ""}, "log_level: Input should be"),
        ({"log_format": "xml"}, "log_format: Input should be 'text' or 'json'"),
        ({"metrics_addr": "8080"}, 'metrics_addr: expected "[host]:port"'),
        ({"metrics_endpoint": "/healthz"}, "metrics_endpoint: must be a path"),
        ({"runner_scale_set_id": "seven"}, "runner_scale_set_id: Input should be a valid integer"),
    ],
)
def test_bad_config_is_one_line_naming_the_problem(
    write_config: Any, changes: dict[str, Any], message: str
) -> None:
    write_config(**changes)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
    assert TOKEN not in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"github_token": "' + TOKEN + '", ', "is not valid JSON (line 1, column"),
        ('["' + TOKEN + '"]', "must hold a JSON object"),
    ],
)
def test_unparsable_file_is_reported_without_its_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, message: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert message in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_missing_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(tmp_path / "absent.json"))
    with pytest.raises(
        ConfigError, match=r"cannot read LISTENER_CONFIG_PATH .*absent\.json: No such file"
    ):
        load_settings()


def test_invalid_secret_value_is_not_echoed(write_config: Any) -> None:
    write_config(github_app_installation_id=TOKEN, github_token="")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "github_app_installation_id: Input should be a valid integer" in str(caught.value)
    assert TOKEN not in str(caught.value)
