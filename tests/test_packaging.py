"""The two distributions: gha-runner-scaler (listener, controller, shared: what the image
installs) and gha-sandbox (the emulators, sandbox/pyproject.toml). And the image's hashed locks
(scripts/lock): each is exactly the closure of what pyproject.toml asks for, and CI installs and
tests the versions they pin (.ci/constraints.txt includes them)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


RUNTIME_LOCK = ROOT / "requirements.lock"
BUILD_LOCK = ROOT / "requirements-build.lock"


def _locked(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """Each entry of a lock: its name, its pinned version and its hashes."""
    entries: dict[str, tuple[str, list[str]]] = {}
    text = lock.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        requirement, *options = line.split(" --")
        pin = Requirement(requirement)
        (specifier,) = pin.specifier
        assert specifier.operator == "==", line
        hashes = [option.strip() for option in options]
        assert all(re.fullmatch(r"hash=sha256:[0-9a-f]{64}", h) for h in hashes), line
        assert hashes, f"{pin.name} has no hash"
        entries[canonicalize_name(pin.name)] = (specifier.version, hashes)
    return entries


def _closure(roots: list[str], locked: dict[str, tuple[str, list[str]]]) -> set[str]:
    """The packages `roots` need, through the requirements of the installed distributions: each
    must be locked, installed at its locked version and within every specifier that asks for it."""
    seen: set[tuple[str, str]] = set()
    todo = [(Requirement(root), "") for root in roots]
    reached: set[str] = set()
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is not locked"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
        assert metadata.version(name) == version, f"{name} installed is not the locked {version}"
        reached.add(name)
        for wanted in ["", *requirement.extras]:
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo += [(Requirement(r), wanted) for r in metadata.requires(name) or []]
    return reached


def test_runtime_lock_is_the_closure_of_pyprojects_dependencies() -> None:
    """A dependency added to, or dropped from, pyproject.toml without `scripts/lock` fails
    here; so does a venv whose versions are not the lock's (CI would test other code than the
    image ships)."""
    locked = _locked(RUNTIME_LOCK)
    dependencies = _project(ROOT / "pyproject.toml")["project"]["dependencies"]
    assert _closure(dependencies, locked) == set(locked)


def test_build_lock_is_the_closure_of_the_build_backend() -> None:
    locked = _locked(BUILD_LOCK)
    requires = _project(ROOT / "pyproject.toml")["build-system"]["requires"]
    assert _closure(requires, locked) == set(locked)


def test_ci_installs_the_locks_versions_through_their_hash_free_copy() -> None:
    """CI and scripts/venv install with `-c .ci/constraints.txt`, which includes
    constraints-lock.txt: the locks' pins exactly, none repeated in constraints.txt (a second pin
    could only disagree). Without hashes, or pip would demand them of the editable installs."""
    constraints = (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
    assert "-c constraints-lock.txt" in constraints
    copy = (ROOT / ".ci" / "constraints-lock.txt").read_text().splitlines()
    pins = [line for line in copy if not line.startswith("#")]
    locked = {**_locked(RUNTIME_LOCK), **_locked(BUILD_LOCK)}
    assert sorted(pins) == sorted(f"{name}=={version}" for name, (version, _) in locked.items())
    pinned = {canonicalize_name(line.split("==")[0]) for line in constraints if "==" in line}
    assert not pinned & set(locked)
