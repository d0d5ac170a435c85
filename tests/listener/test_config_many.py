"""LISTENER_CONFIG_PATH naming a directory: one scale set per *.json file in it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from listener.config import ConfigError, load_all_settings
from tests.listener.test_config import ARC_CONFIG


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("LISTENER_GITHUB_TOKEN", raising=False)
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(tmp_path))
    return tmp_path


def write(folder: Path, name: str, **changes: Any) -> None:
    (folder / f"{name}.json").write_text(json.dumps({**ARC_CONFIG, **changes}))


def test_each_file_is_a_scale_set_in_name_order(folder: Path) -> None:
    write(folder, "b", ephemeral_runner_set_name="set-b", runner_scale_set_id=2)
    write(folder, "a", ephemeral_runner_set_name="set-a", runner_scale_set_id=1)
    (folder / "notes.txt").write_text("not a config")
    loaded = load_all_settings()
    assert [c.settings.ephemeral_runner_set_name for c in loaded] == ["set-a", "set-b"]
    assert [c.settings.runner_scale_set_id for c in loaded] == [1, 2]


def test_a_file_without_a_single_file_path_still_loads_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(ARC_CONFIG))
    monkeypatch.setenv("LISTENER_CONFIG_PATH", str(path))
    [loaded] = load_all_settings()
    assert loaded.settings.ephemeral_runner_set_name == ARC_CONFIG["ephemeral_runner_set_name"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"metrics_addr": ":9999"}, "b.json: metrics_addr differs from a.json's"),
        ({"log_format": "text"}, "b.json: log_format differs from a.json's"),
        # One telemetry server for all: a set cannot open what another's config closed.
        ({"metrics_auth": True}, "b.json: metrics_auth differs from a.json's"),
        ({}, "b.json and a.json both scale EphemeralRunnerSet arc-runners/arc-runner-set-7d9fb"),
        ({"min_runners": -1}, "b.json: min_runners"),
        # LISTENER_STANDBY_LEASE_NAME, applying to every file, would do this.
        (
            {"standby_lease_name": "lease-a"},
            "b.json and a.json both stand by on Lease arc-runners/lease-a",
        ),
    ],
    ids=["metrics-addr", "log-format", "metrics-auth", "same-set", "invalid", "same-lease"],
)
def test_configs_that_cannot_share_a_process_are_refused(
    folder: Path, changes: dict[str, Any], message: str
) -> None:
    write(folder, "a", standby_lease_name="lease-a")
    other = {"ephemeral_runner_set_name": "set-b"} if changes else {}
    write(folder, "b", **other, **changes)
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        load_all_settings()


def test_an_empty_directory_is_refused(folder: Path) -> None:
    with pytest.raises(ConfigError, match=r"without \*\.json files"):
        load_all_settings()
