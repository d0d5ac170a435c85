"""Scans the image's locks against a committed snapshot of the PyPA Advisory Database.

docs/security.md ("Supply chain") says why a snapshot and not pip-audit: the network CI runs in
reaches neither OSV nor PyPI's vulnerability API. Every pinned `name==version` of the locks is
checked against each advisory (OSV format) naming that package: its `versions` list, and its
ECOSYSTEM ranges (`introduced`, `fixed`, `last_affected` events); a `withdrawn` advisory counts
for nothing. A finding fails the scan unless `.ci/audit-accepted.txt` accepts it and the
acceptance's review date has not passed; an acceptance that matches no finding fails it too, so
the file cannot rot. Exit 0: clean; 1: findings or stale acceptances; 2: bad input.

`--refresh CLONE` rewrites the snapshot from a clone of pypa/advisory-database, keeping only the
advisories of the locked packages.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
LOCKS = (ROOT / "requirements.lock", ROOT / "requirements-build.lock")
SNAPSHOT = ROOT / ".ci" / "advisories" / "pypa"
ACCEPTED = ROOT / ".ci" / "audit-accepted.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class BadInput(Exception):
    """A lock, advisory or acceptance the scan cannot read: exit 2 with this message."""


@dataclass(frozen=True)
class Finding:
    advisory: str
    package: str
    version: str
    path: Path


@dataclass(frozen=True)
class Acceptance:
    advisory: str
    package: str
    review_by: datetime.date
    reason: str
    line: int


def read_pins(locks: list[Path]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for lock in locks:
        try:
            text = lock.read_text()
        except OSError as e:
            raise BadInput(f"{lock}: cannot read the lock: {e.strerror}") from e
        for line in text.splitlines():
            if m := PIN.match(line):
                pins[canonicalize_name(m[1])] = m[2]
    return pins


def parse_version(text: object, where: Path) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion as e:
        raise BadInput(f"{where}: not a PyPI version: {text!r}") from e


def in_range(version: Version, events: list[dict[str, Any]], where: Path) -> bool:
    """OSV's evaluation of one range: walk its events in version order, `introduced: "0"` first."""

    def key(event: dict[str, Any]) -> tuple[int, Version]:
        kind, bound = next(iter(event.items()), ("event", None))
        if kind == "introduced" and str(bound) == "0":
            return (0, Version("0"))
        return (1, parse_version(bound, where))

    affected = False
    for event in sorted(events, key=key):
        if "introduced" in event:
            affected |= key(event) <= (1, version)
        elif "fixed" in event:
            affected &= version < parse_version(event["fixed"], where)
        elif "last_affected" in event:
            affected &= version <= parse_version(event["last_affected"], where)
    return affected


def affects(affected: dict[str, Any], version: str, where: Path) -> bool:
    pinned = parse_version(version, where)
    for listed in affected.get("versions") or []:
        try:
            if Version(str(listed)) == pinned:
                return True
        except InvalidVersion:
            continue  # a version PyPI once held that packaging no longer parses: never ours
    return any(
        in_range(pinned, r.get("events") or [], where)
        for r in affected.get("ranges") or []
        if r.get("type") == "ECOSYSTEM"
    )


def scan(advisories: Path, pins: dict[str, str]) -> list[Finding]:
    findings: list[Finding] = []
    for path in sorted((advisories / "vulns").rglob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise BadInput(f"{path}: cannot read the advisory: {e}") from e
        if not isinstance(doc, dict) or "id" not in doc:
            raise BadInput(f"{path}: not an OSV advisory (no `id`)")
        if doc.get("withdrawn"):
            continue
        for affected in doc.get("affected") or []:
            package = affected.get("package") or {}
            if package.get("ecosystem") != "PyPI":
                continue
            name = canonicalize_name(str(package.get("name", "")))
            if name in pins and affects(affected, pins[name], path):
                findings.append(Finding(str(doc["id"]), name, pins[name], path))
                break
    return findings


def read_accepted(path: Path) -> list[Acceptance]:
    accepted: list[Acceptance] = []
    for n, line in enumerate(path.read_text().splitlines() if path.exists() else [], 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(maxsplit=3)
        try:
            advisory, package, review_by, reason = fields
            date = datetime.date.fromisoformat(review_by)
        except ValueError as e:
            raise BadInput(
                f"{path}:{n}: want `ADVISORY-ID PACKAGE REVIEW-BY(YYYY-MM-DD) REASON`, got {line!r}"
            ) from e
        accepted.append(Acceptance(advisory, canonicalize_name(package), date, reason, n))
    return accepted


def provenance(advisories: Path) -> str:
    try:
        meta = yaml.safe_load((advisories / "PROVENANCE.yaml").read_text())
        committed = datetime.datetime.fromisoformat(meta["committed"])
    except (OSError, yaml.YAMLError, TypeError, KeyError, ValueError) as e:
        raise BadInput(f"{advisories}/PROVENANCE.yaml: cannot read the snapshot's date: {e}") from e
    age = (datetime.datetime.now(datetime.UTC) - committed).days
    return f"{meta.get('source')} at {meta.get('commit')}, of {committed.date()} ({age} days old)"


def audit(args: argparse.Namespace) -> int:
    pins = read_pins(args.lock)
    print(f"audit: {len(pins)} locked packages against {provenance(args.advisories)}")
    findings = scan(args.advisories, pins)
    accepted = read_accepted(args.accepted)
    today = datetime.date.today()
    failed = False
    for f in findings:
        acceptance = next(
            (a for a in accepted if a.advisory == f.advisory and a.package == f.package), None
        )
        where = f.path.relative_to(args.advisories)
        if acceptance is None:
            print(f"VULNERABLE {f.package}=={f.version}: {f.advisory} ({where})")
            failed = True
        elif acceptance.review_by < today:
            print(
                f"VULNERABLE {f.package}=={f.version}: {f.advisory} ({where}); its acceptance "
                f"({args.accepted}:{acceptance.line}) was to be reviewed by {acceptance.review_by}"
            )
            failed = True
        else:
            print(
                f"accepted {f.package}=={f.version}: {f.advisory} until {acceptance.review_by}: "
                f"{acceptance.reason}"
            )
    for a in accepted:
        if not any(f.advisory == a.advisory and f.package == a.package for f in findings):
            print(
                f"STALE acceptance {args.accepted}:{a.line}: {a.advisory} {a.package} matches no "
                "locked version: remove the line"
            )
            failed = True
    if not failed:
        print("audit: no unaccepted advisory")
    return 1 if failed else 0


def refresh(clone: Path, advisories: Path, pins: dict[str, str]) -> int:
    if not (clone / "vulns").is_dir():
        raise BadInput(f"{clone}: not a clone of pypa/advisory-database (no vulns/)")
    commit, committed = subprocess.run(
        ["git", "-C", str(clone), "log", "-1", "--format=%H %cI"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    shutil.rmtree(advisories / "vulns", ignore_errors=True)
    kept: list[str] = []
    for src in sorted((clone / "vulns").iterdir()):
        if src.is_dir() and canonicalize_name(src.name) in pins:
            shutil.copytree(src, advisories / "vulns" / src.name)
            kept.append(src.name)
    shutil.copyfile(clone / "LICENSE", advisories / "LICENSE")
    meta = {
        "source": "https://github.com/pypa/advisory-database",
        "commit": commit,
        "committed": committed,
        "filtered_to": kept,
    }
    header = "# Written by `scripts/audit --refresh`: the snapshot's origin.\n"
    (advisories / "PROVENANCE.yaml").write_text(header + yaml.safe_dump(meta, sort_keys=False))
    print(f"audit: kept the advisories of {len(kept)} packages from {commit} ({committed})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/audit", description=__doc__.split("\n")[0])
    parser.add_argument("--lock", type=Path, action="append", help="default: the two locks")
    parser.add_argument("--advisories", type=Path, default=SNAPSHOT, metavar="DIR")
    parser.add_argument("--accepted", type=Path, default=ACCEPTED, metavar="FILE")
    parser.add_argument("--refresh", type=Path, metavar="CLONE", help="rebuild the snapshot")
    args = parser.parse_args()
    args.lock = args.lock or list(LOCKS)
    try:
        if args.refresh:
            return refresh(args.refresh, args.advisories, read_pins(args.lock))
        return audit(args)
    except BadInput as e:
        print(f"audit: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
