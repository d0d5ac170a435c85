"""`gha-sandbox demo` through its real entry point: a short workload through the real
`gha-controller` and `gha-listener` processes against both emulators, judged by its JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sandbox.demo.cluster import LISTENER_USER
from sandbox.demo.workload import digest, load_trace


def demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox", "demo", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_short_workload_completes_with_every_invariant_held(tmp_path: Path) -> None:
    """Every job completes on a runner that went New -> Pending -> Running (written by the
    listener's identity) -> Succeeded -> deleted; nothing is killed, violated or left over, the
    temporary workdir is removed, and the summary and the plot are written."""
    report_path, plot_path, tmp = tmp_path / "report.json", tmp_path / "run.png", tmp_path / "tmp"
    tmp.mkdir()
    done = demo(
        "--jobs", "4", "--duration", "20", "--max-runners", "3",
        "--report", str(report_path), "--plot", str(plot_path),
        env={"TMPDIR": str(tmp)},
    )  # fmt: skip
    context = done.stdout + done.stderr
    assert done.returncode == 0, context
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert report["jobs"] == {
        "enqueued": 4,
        "completed": 4,
        "succeeded": 4,
        "failed": 0,
        "lost": 0,
    }, context
    runners = report["runners"]
    assert runners["killed_while_busy"] == 0
    assert report["invariant_violations"] == []
    assert report["leftovers"] == {"kubernetes": [], "actions": []}
    assert runners["lifecycles"] == {"New>Pending>Running>Succeeded>deleted": runners["created"]}
    assert runners["running_written_by"] == {LISTENER_USER: runners["created"]}
    # maxRunners bounds both what the listener asks for and what exists at once.
    assert runners["max_desired"] == 3
    assert runners["max_concurrent"] <= 3
    assert set(report["reconciles_per_runner"]) == {"ephemeralrunner", "ephemeralrunnerset"}
    assert report["queue_time_s"]["max"] >= report["queue_time_s"]["p50"] > 0
    assert report["api_calls_per_job"]["kubernetes"] > 0
    assert report["components"] == {
        "exit_codes": {"listener": 0, "controller": 0},
        "crash": None,
    }
    assert report["ok"] is True
    assert "busy runners killed" in done.stdout
    assert "result: ok" in done.stdout
    assert plot_path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert list(tmp.iterdir()) == []


def test_a_trace_that_cannot_be_read_stops_at_start_with_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("queued_at,duration,result,labels\n0,ten,succeeded,\n")
    done = demo("--trace", str(trace))
    assert done.returncode == 2
    assert done.stderr == f"gha-sandbox demo: {trace}:2: queued_at and duration must be numbers\n"


def test_a_trace_replays_with_its_labels_and_results(tmp_path: Path) -> None:
    """Jobs with runs-on labels route to the set (its labels are the trace's); a job the trace
    says fails is reported failed, not lost."""
    trace, report_path = tmp_path / "trace.csv", tmp_path / "report.json"
    trace.write_text(
        "queued_at,duration,result,labels\n"
        "0,10,succeeded,linux x64\n"
        "20,10,failed,linux x64 docker\n"
        "40,5,,\n"
    )
    done = demo("--trace", str(trace), "--seed", "3", "--report", str(report_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["workload"] == {
        "source": f"trace:{trace}",
        "seed": 3,
        "jobs": 3,
        "span_s": 40.0,
        "sha256": digest(load_trace(trace)),
        "missing": 0,
    }
    assert report["jobs"] == {
        "enqueued": 3,
        "completed": 3,
        "succeeded": 2,
        "failed": 1,
        "lost": 0,
    }


def test_a_component_that_crashes_is_reported_with_its_log_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """A controller that cannot start (a setting it rejects) ends the run: the demo shows the
    end of its log, exits non-zero, and removes its temporary directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = demo("--jobs", "1", env={"TMPDIR": str(tmp), "GHA_CONTROLLER_WORKERS": "0"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "controller exited with code 2; the end of its log:" in done.stdout
    assert "workers" in done.stdout
    assert "result: FAILED: 1 job(s) did not complete; controller exited with code 2" in done.stdout
    assert list(tmp.iterdir()) == []
