"""scripts/image-test outside CI: where podman cannot run it says why and skips, but with CI=true
it fails, so CI never passes without the image test (.ci/run installs what it needs). And the
README's docker-run steps it runs are all there, numbered 1 to 8 (7 and 8: the standby's two
containers, which the image test now runs too)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "scripts" / "image-test"


def _run_without_podman(tmp_path: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    """The script with a PATH that holds bash and dirname only (no podman, runc, debootstrap)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return subprocess.run(
        [str(SCRIPT)],
        env={"PATH": str(bin_dir), **environment},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_skips_with_the_reason_outside_ci(tmp_path: Path) -> None:
    result = _run_without_podman(tmp_path)
    assert result.returncode == 0, result.stderr
    expected = "not installed" if os.geteuid() == 0 else "not root"
    assert "image-test: skipped: " in result.stdout
    assert expected in result.stdout


def test_fails_in_ci_when_it_cannot_run(tmp_path: Path) -> None:
    result = _run_without_podman(tmp_path, CI="true")
    assert result.returncode == 1
    assert "image-test: cannot run in CI: " in result.stdout


def test_finds_the_readmes_eight_steps() -> None:
    spec = importlib.util.spec_from_file_location("image_test", ROOT / "scripts" / "image_test.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    steps = module.readme_steps()
    assert sorted(steps) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert "docker build -t gha-runner-scaler:0.1.0 ." in steps[1]
    assert "--flatten" in steps[4]
    assert "docker stop gha-listener-my-runners" in steps[6]
    assert "manifests/listener/standby" in steps[7]
    assert '"gha-listener-my-runners-$replica"' in steps[8]
