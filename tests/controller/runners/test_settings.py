"""The reconcilers' settings come from `GHA_CONTROLLER_*`; a bad one is named in one line."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.settings import ConfigError, runner_settings_from_environment


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GHA_CONTROLLER_MAX_POD_FAILURES", "8")
    monkeypatch.setenv("GHA_CONTROLLER_EXCLUDE_LABEL_PROPAGATION_PREFIXES", '["example.com/"]')
    settings = runner_settings_from_environment()
    assert settings.failure_policy().max_pod_failures == 8
    assert settings.exclude_label_propagation_prefixes == ("example.com/",)
    assert settings.replacement_policy().max_delay == timedelta(minutes=10)


def test_registration_bounds_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert runner_settings_from_environment().registration_timeout_seconds == 600
    assert runner_settings_from_environment().missing_credentials_removal_timeout_seconds == 120
    monkeypatch.setenv("GHA_CONTROLLER_REGISTRATION_TIMEOUT_SECONDS", "0")
    monkeypatch.setenv("GHA_CONTROLLER_MISSING_CREDENTIALS_REMOVAL_TIMEOUT_SECONDS", "30")
    settings = runner_settings_from_environment()
    assert settings.registration_timeout_seconds == 0
    assert settings.missing_credentials_removal_timeout_seconds == 30


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GHA_CONTROLLER_MAX_POD_FAILURES", "-1"),
        ("GHA_CONTROLLER_JOB_STILL_RUNNING_RETRY_SECONDS", "soon"),
        ("GHA_CONTROLLER_MISSING_CREDENTIALS_REMOVAL_TIMEOUT_SECONDS", "0"),
        ("GHA_CONTROLLER_REGISTRATION_TIMEOUT_SECONDS", "-1"),
    ],
)
def test_bad_setting_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"^{variable}: ") as raised:
        runner_settings_from_environment()
    assert "\n" not in str(raised.value)
