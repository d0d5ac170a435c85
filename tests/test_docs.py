"""Every relative link of the README and docs/ reaches a file of the repository, and its
`#anchor` a heading of that file (GitHub's rule for heading anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from listener.metrics import CAPACITY_WAIT_LABELS, STAGE_LABELS, TIMELINE_METRICS
from shared.api.timeline import STAGES

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = anchor(heading)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"[a-z]+:", target) and not target.startswith("mailto:")
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_job_timeline_metrics_and_stages_are_documented() -> None:
    """The listener's timeline series (names and labels) and every stage are in
    docs/job-timeline.md, and the series in docs/metrics.md."""
    timeline_page = (ROOT / "docs" / "job-timeline.md").read_text()
    metrics_page = (ROOT / "docs" / "metrics.md").read_text()
    for name in TIMELINE_METRICS:
        assert f"`{name}`" in timeline_page
        assert name in metrics_page
    rows = {
        line.split("|")[1].strip(): line for line in timeline_page.splitlines() if "| `gha_" in line
    }
    for name, labels in (
        ("gha_job_stage_duration_seconds", STAGE_LABELS),
        ("gha_jobs_waited_at_max_runners_total", CAPACITY_WAIT_LABELS),
    ):
        documented = rows[f"`{name}`"].split("|")[3]
        assert sorted(re.findall(r"`(\w+)`", documented)) == sorted(labels)
    for stage in STAGES:
        assert f"| `{stage}` |" in timeline_page
