"""The soak at CI size: a few simulated minutes at a steady job rate, judged by its report: both
processes' memory, descriptors and sockets and the emulator's open watches were sampled, each
series has a fitted slope, and no invariant failed. The slopes' values are RELIABILITY.md's
business (a 30-minute run); a short run only proves they are measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERIES = {
    f"{process}.{measure}"
    for process in ("controller", "listener")
    for measure in ("rss_kib", "fds", "sockets")
} | {"kube.open_watches"}


def test_a_short_soak_reports_a_slope_for_every_series_and_no_violation(tmp_path: Path) -> None:
    report_path = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "sandbox", "demo", "--soak", "4", "--speedup", "60",
            "--duration", "20", "--report", str(report_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_path.read_text())
    soak = report["soak"]
    assert set(soak["series"]) == SERIES
    assert soak["samples"] >= 8
    for name, figures in soak["series"].items():
        assert isinstance(figures["slope_per_min"], float), name
        assert figures["max"] >= figures["first"] > 0, name
    assert report["workload"]["source"] == "soak"
    assert report["jobs"]["completed"] == report["workload"]["jobs"] == 40
    assert report["invariant_violations"] == []
    assert report["ok"] is True
