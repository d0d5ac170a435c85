"""Every script a user runs from scripts/ bootstraps the virtual environment it uses
(`. scripts/venv`) before it touches .venv: on a fresh clone `scripts/image-test` used to fail
with "No such file or directory" until another script had made it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
RUN = sorted(p for p in SCRIPTS.iterdir() if p.is_file() and os.access(p, os.X_OK))


def test_there_are_scripts_to_check() -> None:
    assert {p.name for p in RUN} >= {"test", "sandbox", "image-test", "gen-crds"}


@pytest.mark.parametrize("script", RUN, ids=lambda p: p.name)
def test_a_script_using_the_venv_bootstraps_it_first(script: Path) -> None:
    lines = script.read_text().splitlines()
    uses = [i for i, line in enumerate(lines) if ".venv/" in line and not line.startswith("#")]
    if not uses:
        return
    sourced = [i for i, line in enumerate(lines) if line.strip() == ". scripts/venv"]
    assert sourced, f"{script.name} uses .venv without `. scripts/venv`"
    assert sourced[0] < uses[0]
