"""The two distributions: gha-runner-scaler (listener, controller, shared: what the image
installs) and gha-sandbox (the emulators, sandbox/pyproject.toml)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]


def _project(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


def test_sandbox_distribution_lists_every_sandbox_package() -> None:
    sandbox = _project(ROOT / "sandbox" / "pyproject.toml")
    setuptools = sandbox["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"sandbox": "."}
    on_disk = sorted(
        ".".join(("sandbox", *init.parent.relative_to(ROOT / "sandbox").parts))
        for init in (ROOT / "sandbox").rglob("__init__.py")
        if "build" not in init.relative_to(ROOT / "sandbox").parts
    )
    assert sorted(setuptools["packages"]) == on_disk


def test_gha_sandbox_script_belongs_to_the_sandbox_distribution() -> None:
    main = _project(ROOT / "pyproject.toml")["project"]
    sandbox = _project(ROOT / "sandbox" / "pyproject.toml")["project"]
    assert "gha-sandbox" not in main["scripts"]
    assert sandbox["scripts"] == {"gha-sandbox": "sandbox.__main__:main"}
    assert f"gha-runner-scaler=={main['version']}" in sandbox["dependencies"]


def test_main_distribution_does_not_find_the_sandbox() -> None:
    setuptools = _project(ROOT / "pyproject.toml")["tool"]["setuptools"]
    find = setuptools["packages"]["find"]
    assert find["include"] == ["listener*", "controller*", "shared*"]
