"""scripts/audit: the locks against the committed advisory snapshot (docs/security.md, "Supply
chain"), and the scan's rules on advisories and acceptances written here."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "audit.py"
TOMORROW = datetime.date.today() + datetime.timedelta(days=1)
YESTERDAY = datetime.date.today() - datetime.timedelta(days=1)


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False
    )


def locked_version(package: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.startswith(f"{package}=="):
            return line.split("==")[1].split()[0]
    raise AssertionError(f"{package} is not in requirements.lock")


@pytest.fixture
def advisories(tmp_path: Path) -> Path:
    """An empty snapshot with its provenance: tests add advisories to vulns/."""
    directory = tmp_path / "advisories"
    (directory / "vulns").mkdir(parents=True)
    (directory / "PROVENANCE.yaml").write_text(
        yaml.safe_dump({"source": "test", "commit": "0" * 40, "committed": "2026-01-02T03:04:05Z"})
    )
    return directory


def advisory(directory: Path, id_: str, package: str, **affected: object) -> None:
    extra = {"withdrawn": affected.pop("withdrawn")} if "withdrawn" in affected else {}
    doc = {
        "id": id_,
        **extra,
        "affected": [{"package": {"name": package, "ecosystem": "PyPI"}, **affected}],
    }
    (directory / "vulns" / package).mkdir(exist_ok=True)
    (directory / "vulns" / package / f"{id_}.yaml").write_text(yaml.safe_dump(doc))


def scan(advisories: Path, tmp_path: Path, *accepted: str) -> subprocess.CompletedProcess[str]:
    lock = tmp_path / "requirements.lock"
    lock.write_text("aiohttp==3.14.5 \\\n    --hash=sha256:00\npyYAML==6.0.4\n")
    accepted_file = tmp_path / "accepted.txt"
    accepted_file.write_text("# comment\n\n" + "".join(f"{line}\n" for line in accepted))
    return run("--advisories", advisories, "--lock", lock, "--accepted", accepted_file)


def test_the_locks_pass_against_the_committed_snapshot() -> None:
    result = run()
    assert result.returncode == 0, result.stdout + result.stderr
    provenance = yaml.safe_load((ROOT / ".ci/advisories/pypa/PROVENANCE.yaml").read_text())
    first = result.stdout.splitlines()[0]
    assert provenance["commit"] in first
    assert "days old" in first  # so a stale snapshot shows in every CI log


def test_the_snapshot_holds_only_the_locked_packages() -> None:
    locked = {
        canonicalize_name(line.split("==")[0])
        for lock in ("requirements.lock", "requirements-build.lock")
        for line in (ROOT / lock).read_text().splitlines()
        if "==" in line and not line.startswith(" ")
    }
    kept = {canonicalize_name(p.name) for p in (ROOT / ".ci/advisories/pypa/vulns").iterdir()}
    assert kept, "the snapshot holds no advisory at all"
    assert kept <= locked


def test_an_advisory_listing_a_pinned_version_fails_the_real_lock(advisories: Path) -> None:
    version = locked_version("aiohttp")
    advisory(advisories, "PYSEC-9999-1", "aiohttp", versions=["0.1", version])
    result = run("--advisories", advisories, "--accepted", advisories / "none.txt")
    assert result.returncode == 1
    assert f"VULNERABLE aiohttp=={version}: PYSEC-9999-1" in result.stdout


def test_a_name_is_matched_in_its_normal_form(advisories: Path, tmp_path: Path) -> None:
    advisory(advisories, "PYSEC-9999-2", "PyYAML", versions=["6.0.4"])
    result = scan(advisories, tmp_path)
    assert result.returncode == 1
    assert "VULNERABLE pyyaml==6.0.4: PYSEC-9999-2" in result.stdout


@pytest.mark.parametrize(
    ("events", "hit"),
    [
        ([{"introduced": "0"}, {"fixed": "3.15.0"}], True),
        ([{"introduced": "3.14.0"}], True),
        ([{"introduced": "0"}, {"last_affected": "3.14.5"}], True),
        ([{"introduced": "0"}, {"fixed": "3.14.5"}], False),
        ([{"introduced": "0"}, {"last_affected": "3.14.4"}], False),
        ([{"introduced": "3.14.6"}], False),
        # Two ranges in one: fixed in 3.9, broken again in 3.14.
        ([{"fixed": "3.9"}, {"introduced": "3.14.0"}, {"introduced": "0"}], True),
        ([{"introduced": "0"}, {"fixed": "3.9"}, {"introduced": "3.15"}], False),
    ],
)
def test_a_range_advisory(
    advisories: Path, tmp_path: Path, events: list[dict[str, str]], hit: bool
) -> None:
    advisory(
        advisories, "PYSEC-9999-3", "aiohttp", ranges=[{"type": "ECOSYSTEM", "events": events}]
    )
    result = scan(advisories, tmp_path)
    assert result.returncode == (1 if hit else 0), result.stdout
    assert ("VULNERABLE aiohttp==3.14.5: PYSEC-9999-3" in result.stdout) is hit


@pytest.mark.parametrize("event", [{"fixed": "not a version"}, {}])
def test_an_advisory_it_cannot_evaluate_is_an_error(
    advisories: Path, tmp_path: Path, event: dict[str, str]
) -> None:
    events = [{"introduced": "0"}, event]
    advisory(
        advisories, "PYSEC-9999-8", "aiohttp", ranges=[{"type": "ECOSYSTEM", "events": events}]
    )
    result = scan(advisories, tmp_path)
    assert result.returncode == 2
    assert "PYSEC-9999-8.yaml: not a PyPI version" in result.stderr


def test_a_withdrawn_advisory_is_ignored(advisories: Path, tmp_path: Path) -> None:
    advisory(advisories, "PYSEC-9999-4", "aiohttp", versions=["3.14.5"], withdrawn="2026-01-01")
    result = scan(advisories, tmp_path)
    assert result.returncode == 0, result.stdout
    assert "PYSEC-9999-4" not in result.stdout


def test_an_accepted_finding_passes_until_its_review_date(advisories: Path, tmp_path: Path) -> None:
    advisory(advisories, "PYSEC-9999-5", "aiohttp", versions=["3.14.5"])
    result = scan(advisories, tmp_path, f"PYSEC-9999-5 aiohttp {TOMORROW} server side only")
    assert result.returncode == 0, result.stdout
    assert f"accepted aiohttp==3.14.5: PYSEC-9999-5 until {TOMORROW}: server side" in result.stdout

    result = scan(advisories, tmp_path, f"PYSEC-9999-5 aiohttp {YESTERDAY} server side only")
    assert result.returncode == 1
    assert f"to be reviewed by {YESTERDAY}" in result.stdout


def test_an_acceptance_matching_nothing_is_reported(advisories: Path, tmp_path: Path) -> None:
    result = scan(advisories, tmp_path, f"PYSEC-9999-6 aiohttp {TOMORROW} fixed since")
    assert result.returncode == 1
    assert "STALE acceptance" in result.stdout
    assert "PYSEC-9999-6 aiohttp matches no locked version" in result.stdout


def test_an_acceptance_without_a_date_is_refused(advisories: Path, tmp_path: Path) -> None:
    result = scan(advisories, tmp_path, "PYSEC-9999-7 aiohttp because")
    assert result.returncode == 2
    assert "accepted.txt:3: want `ADVISORY-ID PACKAGE REVIEW-BY(YYYY-MM-DD) REASON`" in (
        result.stderr
    )


def test_refresh_keeps_only_the_locked_packages(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    for package in ("aiohttp", "PyYAML", "django"):
        (clone / "vulns" / package).mkdir(parents=True)
        (clone / "vulns" / package / "PYSEC-1.yaml").write_text("id: PYSEC-1\n")
    (clone / "LICENSE").write_text("CC-BY 4.0\n")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    lock = tmp_path / "requirements.lock"
    lock.write_text("aiohttp==3.14.5\npyyaml==6.0.4\n")
    snapshot = tmp_path / "snapshot"
    result = run("--refresh", clone, "--advisories", snapshot, "--lock", lock)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (snapshot / "vulns").iterdir()) == ["PyYAML", "aiohttp"]
    provenance = yaml.safe_load((snapshot / "PROVENANCE.yaml").read_text())
    assert provenance["filtered_to"] == ["PyYAML", "aiohttp"]
    assert len(provenance["commit"]) == 40
    assert (snapshot / "LICENSE").read_text() == "CC-BY 4.0\n"
