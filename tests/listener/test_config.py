"""Settings: ARC's config file keys, environment overrides, and one-line errors without secrets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from listener.config import (
    MAX_CONFIG_BYTES,
    MAX_INT32,
    ConfigError,
    ListenerSettings,
    load_settings,
)

ARC_FIXTURES = Path(__file__).parent / "fixtures" / "arc"

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
    for name in (
        "LISTENER_MIN_RUNNERS",
        "LISTENER_GITHUB_TOKEN",
        "LISTENER_MAX_RUNNERS",
        "LISTENER_GITHUB_TOKEN_FILE",
        "LISTENER_GITHUB_APP_PRIVATE_KEY_FILE",
    ):
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
    assert settings.metrics_listen == ("", 8080)
    assert loaded.ignored_keys == []


def test_environment_overrides_the_file(write_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(github_token="")
    monkeypatch.setenv("LISTENER_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("LISTENER_MIN_RUNNERS", "3")
    settings = load_settings().settings
    assert settings.min_runners == 3
    assert settings.github_token.get_secret_value() == TOKEN


def test_objects_and_lists_come_from_the_environment_as_json_in_any_case(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic-settings read these variables before (docs/listener.md#memory says why no more):
    the name in any case, objects and lists as JSON, as it did."""
    write_config(runner_scale_set_labels=["from-file"])
    monkeypatch.setenv("LISTENER_RUNNER_SCALE_SET_LABELS", '["gpu", "linux"]')
    monkeypatch.setenv("listener_scaling_policy", '{"minIdle": 2}')
    monkeypatch.setenv("Listener_Max_Runners", "9")
    settings = load_settings().settings
    assert settings.runner_scale_set_labels == ["gpu", "linux"]
    assert settings.scaling_policy is not None
    assert settings.scaling_policy.min_idle == 2
    assert settings.max_runners == 9


def test_an_environment_value_that_is_not_json_is_named_without_its_text(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config()
    monkeypatch.setenv("LISTENER_METRICS", "{'counters': 'ghp_secretish'}")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    # The shared decoder (shared.wire) says why and where, never quoting the text, in the words
    # of the listener's parser, `json` (pydantic-core's "key must be a string" before the
    # process's parser was chosen once: tests/conftest.py, `json_parser`).
    assert str(caught.value) == (
        "LISTENER_METRICS is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1 column 2"
    )


def test_an_environment_value_is_validated_like_the_files(
    write_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config()
    monkeypatch.setenv("LISTENER_MIN_RUNNERS", "-1")
    with pytest.raises(ConfigError, match=r"^min_runners: Input should be greater than or equal"):
        load_settings()


def test_the_model_alone_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller validates each listener config it writes with this model: a LISTENER_*
    variable of its own environment must not change the verdict. Before, the model was a
    pydantic-settings BaseSettings and read them."""
    monkeypatch.setenv("LISTENER_MIN_RUNNERS", "5")
    config = {key: value for key, value in ARC_CONFIG.items() if value is not None}
    assert ListenerSettings(**config).min_runners == 1


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
            'vault_type "azure_key_vault" is not supported by gha-listener: give the GitHub '
            "credentials in the config file or in a file named by LISTENER_GITHUB_TOKEN_FILE",
        ),
        ({"log_level": "verbose"}, "log_level: Input should be 'debug', 'info', 'warn' or 'error'"),
        ({"log_level": ""}, "log_level: Input should be"),
        ({"log_format": "xml"}, "log_format: Input should be 'text' or 'json'"),
        ({"metrics_addr": "8080"}, 'metrics_addr: expected "host:port"'),
        ({"metrics_addr": "::1:8080"}, 'metrics_addr: expected "host:port"'),
        ({"metrics_addr": "[nope]:8080"}, 'metrics_addr: expected "host:port"'),
        ({"metrics_addr": ":65536"}, 'metrics_addr: expected "host:port"'),
        ({"metrics_endpoint": ""}, "metrics_endpoint is required when metrics_addr is set"),
        (
            {"server_root_ca": "not a certificate"},
            "server_root_ca: the server root CA is not a valid PEM certificate bundle",
        ),
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
        # `json`'s words, the listener's parser (pydantic-core's "EOF while parsing" before the
        # process's parser was chosen once: tests/conftest.py, `json_parser`).
        ('{"github_token": "' + TOKEN + '", ', "is not valid JSON: Expecting property name"),
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


@dataclass(frozen=True)
class ArcCase:
    """A config file as ARC's controller writes it (docs/listener.md, "Configuration")."""

    file: str
    credentials: str
    listen: tuple[str, int] | None
    endpoint: str
    root_ca: bool = False


ARC_CASES = [
    ArcCase("pat-metrics-on.json", "pat", ("", 8080), "/metrics"),
    ArcCase("app-metrics-off.json", "app", None, ""),
    ArcCase("pat-metrics-ipv6.json", "pat", ("::", 8080), "/metrics"),
    ArcCase("pat-server-root-ca.json", "pat", ("", 8080), "/metrics", root_ca=True),
]


@pytest.mark.parametrize("case", ARC_CASES, ids=[case.file for case in ARC_CASES])
def test_every_config_arcs_controller_writes_loads(
    case: ArcCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: metrics off ("" and "") and "[::]:8080" were rejected with exit 2."""
    path = ARC_FIXTURES / case.file
    written = json.loads(path.read_text())
    assert list(written)[:3] == ["configure_url", "vault_type", "vault_lookup_key"]
    assert list(written)[-3:] == ["metrics_addr", "metrics_endpoint", "metrics"]
    assert (written["max_runners"], written["log_level"]) == (MAX_INT32, "debug")
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    loaded = load_settings()
    settings = loaded.settings
    assert loaded.ignored_keys == []
    assert settings.metrics_listen == case.listen
    assert settings.metrics_endpoint == case.endpoint
    assert settings.log_level == "debug"
    assert bool(settings.server_root_ca) is case.root_ca
    if case.credentials == "pat":
        assert settings.github_token.get_secret_value() == written["github_token"]
    else:
        assert settings.github_app_installation_id == written["github_app_installation_id"]
        assert settings.github_token.get_secret_value() == ""
    if written["metrics"] is not None:
        assert settings.metrics is not None
        assert settings.metrics.histograms["gha_job_startup_duration_seconds"].buckets == [
            1,
            5,
            30,
            60,
            300,
        ]


def test_arcs_azure_key_vault_config_is_refused_naming_the_alternative(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(ARC_FIXTURES / "azure-key-vault.json"))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "LISTENER_GITHUB_TOKEN_FILE" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value"), [("github_token", TOKEN), ("github_app_private_key", KEY)]
)
def test_a_secret_can_come_from_the_file_its_variable_names(
    write_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str
) -> None:
    if key == "github_token":
        write_config(github_token="ghp_fromTheConfigFileWhichTheFileOverrides")
    else:
        write_config(github_token="", github_app_id="1", github_app_installation_id=2)
    secret = tmp_path / "secret"
    secret.write_text(value + "\n")
    monkeypatch.setenv(f"LISTENER_{key.upper()}_FILE", str(secret))
    settings = load_settings().settings
    assert getattr(settings, key).get_secret_value() == value


@pytest.mark.parametrize(
    ("content", "environment", "message"),
    [
        (None, {}, "cannot read LISTENER_GITHUB_TOKEN_FILE {path}: No such file or directory"),
        ("", {}, "LISTENER_GITHUB_TOKEN_FILE {path} is empty"),
        (
            TOKEN,
            {"LISTENER_GITHUB_TOKEN": TOKEN},
            "LISTENER_GITHUB_TOKEN and LISTENER_GITHUB_TOKEN_FILE are both set: keep one",
        ),
    ],
    ids=["missing", "empty", "both"],
)
def test_an_unusable_secret_file_is_one_line(
    write_config: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str | None,
    environment: dict[str, str],
    message: str,
) -> None:
    write_config(github_token="")
    secret = tmp_path / "token"
    if content is not None:
        secret.write_text(content)
    monkeypatch.setenv("LISTENER_GITHUB_TOKEN_FILE", str(secret))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == message.format(path=secret)


@pytest.mark.parametrize(
    "url",
    ["http://ghes.example.com/org", "HTTP://10.0.0.7:8080/org/repo", "http://u:pw@ghes/org"],
)
def test_a_plain_http_url_off_loopback_is_refused_saying_how_to_opt_in(
    write_config: Any, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.delenv("LISTENER_ALLOW_INSECURE_GITHUB", raising=False)
    write_config(configure_url=url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    text = str(caught.value)
    assert "configure_url" in text
    assert "plain http" in text
    assert "LISTENER_ALLOW_INSECURE_GITHUB" in text
    assert "pw" not in text
    monkeypatch.setenv("LISTENER_ALLOW_INSECURE_GITHUB", "true")
    assert load_settings().settings.configure_url == url


@pytest.mark.parametrize(
    "url",
    [
        "https://ghes.example.com/org",
        "http://127.0.0.1:8080/org",
        "http://[::1]:8080/org",
        "http://localhost/org",
    ],
)
def test_https_and_loopback_urls_need_no_opt_in(write_config: Any, url: str) -> None:
    write_config(configure_url=url)
    assert load_settings().settings.configure_url == url


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "recursion limit exceeded"),
        (b'{"configure_url": "\xff"}', "invalid unicode code point"),
        (b'{"min_runners": NaN}', "expected value"),
        (b'{"min_runners": 1' + b"0" * 5_000 + b"}", "number out of range"),
        (b'{"runner_group": "' + b"x" * MAX_CONFIG_BYTES + b'"}', "is over the cap of 1.0 MiB"),
    ],
    ids=["nested", "utf-8", "nan", "huge-number", "over-the-cap"],
)
def test_a_hostile_config_file_is_one_line_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, why: str
) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert why in str(caught.value)
    assert "\n" not in str(caught.value)
    assert len(str(caught.value)) < 300
