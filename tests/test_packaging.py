"""The two distributions: gha-runner-scaler (listener, controller, shared: what the image
installs) and gha-sandbox (the emulators, sandbox/pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
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


def _files_under(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_installed_sandbox_carries_the_projects_manifests(tmp_path: Path) -> None:
    """A gha-sandbox wheel installed away from the checkout finds the manifests it applies (the
    CRDs, the install kustomization) in its own package: the checkout's files, not a copy."""
    wheels, target, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), ROOT / "sandbox"],
        check=True,
    )
    [wheel] = wheels.glob("gha_sandbox-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
    )
    probe = (
        "import sandbox, sandbox.demo.cluster as cluster\n"
        "from sandbox.kube.emulator import project_crds\n"
        "assert cluster.INSTALL.is_file() and cluster.EXAMPLE_SET.is_file()\n"
        "print(sandbox.MANIFESTS, *(crd.name for crd in project_crds()))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    manifests, *crds = found.stdout.split()
    installed = Path(manifests)
    assert crds == sorted(crd.name for crd in (ROOT / "manifests" / "crds").glob("*.yaml"))
    assert installed == (target / "sandbox" / "manifests").resolve()
    assert _files_under(installed) == _files_under(ROOT / "manifests")
