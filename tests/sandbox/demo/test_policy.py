"""`gha-sandbox demo --policy FILE`: the same workload under a policy and under ARC's formula,
through the real controller and listener, compared from the JSON report (docs/sandbox.md#policy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Six 10 s jobs, one every 20 s (simulated): each arrives when nothing runs, so without idle
# runners every job waits for a cold pod, and with minIdle 2 it finds a started one.
JOBS = 6
SPACED = "queued_at,duration,result,labels\n" + "".join(
    f"{20 + 20 * i},10,,\n" for i in range(JOBS)
)


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox", "demo", *args],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )


@pytest.mark.parametrize("listener", ["in-cluster", "docker-run"])
def test_min_idle_waits_less_and_idles_more_than_arc_on_the_same_workload(
    tmp_path: Path, listener: str
) -> None:
    """minIdle 2 reaches the listener (in-cluster through the AutoscalingRunnerSet's
    spec.scalingPolicy, docker-run through the config's scaling_policy): its run asks for the
    busy runner plus two, so its jobs start on warm runners (lower queue time p50) and it pays in
    idle runner-seconds; the baseline is ARC's formula on the same workload; every invariant
    held and every job completed in both runs, and the plot is written."""
    trace, policy = tmp_path / "spaced.csv", tmp_path / "idle2.yaml"
    trace.write_text(SPACED)
    policy.write_text("minIdle: 2\n")
    report_path, plot_path = tmp_path / "compare.json", tmp_path / "compare.png"
    done = demo(
        "--policy", str(policy), "--trace", str(trace), "--max-runners", "6",
        "--listener", listener, "--report", str(report_path), "--plot", str(plot_path),
    )  # fmt: skip
    context = done.stdout + done.stderr
    assert done.returncode == 0, context
    report: dict[str, Any] = json.loads(report_path.read_text())
    assert [run["name"] for run in report["runs"]] == ["idle2", "none (ARC)"]
    idle2, arc = (run["report"] for run in report["runs"])
    assert report["runs"][0]["applied_policy"] == {"minIdle": 2}
    assert report["runs"][1]["applied_policy"] is None
    for run in (idle2, arc):
        assert run["workload"]["sha256"] == report["workload"]["sha256"]
        assert run["options"]["listener"] == listener
        assert run["jobs"]["completed"] == JOBS, context
        assert run["jobs"]["lost"] == 0
        assert run["invariant_violations"] == []
        assert run["runners"]["killed_while_busy"] == 0
        assert run["ok"], context
    assert idle2["queue_time_s"]["p50"] < arc["queue_time_s"]["p50"]
    assert idle2["runners"]["idle_runner_seconds"] > arc["runners"]["idle_runner_seconds"]
    # One job at a time: ARC asks for it alone, minIdle for it and two idle runners.
    assert idle2["runners"]["max_desired"] == 3
    assert "queue time p50 (s)" in done.stdout
    # Which stages minIdle shortens: its jobs start on runners already up, so the cluster's
    # stages (a runner made, its pod started, the runner registered) are 0 for them. Summed:
    # their bounds are on the listener's clock, the moments between them whole seconds.
    cluster = ("controller", "scheduling", "container_start", "registration")
    assert sum(idle2["stage_split_s"][stage]["p50"] for stage in cluster) == 0
    assert sum(arc["stage_split_s"][stage]["p50"] for stage in cluster) > 0
    assert "stage container_start p50 / p95 (s)" in done.stdout
    assert plot_path.read_bytes().startswith(b"\x89PNG")


@pytest.mark.anywhere
@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("minIdle: 40\n", "minIdle must not be greater than maxRunners (40 > 30)"),
        (
            "schedules: [{cron: '@daily', duration: 1h, timeZone: Europe/Berln, minIdle: 5}]",
            'schedules[0].timeZone: unknown time zone "Europe/Berln"',
        ),
        ('{"minIdel": 2}', "minIdel: Extra inputs are not permitted"),
        ("minIdle: [\n", "not YAML or JSON"),
        ("- 2\n", "must hold a mapping of scalingPolicy fields"),
    ],
)
def test_a_bad_policy_file_stops_the_demo_with_one_line_and_exit_2(
    tmp_path: Path, content: str, line: str
) -> None:
    """Checked with the listener's and the reconciler's own rules before anything starts."""
    policy = tmp_path / "bad.yaml"
    policy.write_text(content)
    done = demo("--policy", str(policy), "--jobs", "1")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"gha-sandbox demo: {policy}: ")
    assert line in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.anywhere
def test_more_than_two_policies_is_a_usage_error(tmp_path: Path) -> None:
    policy = tmp_path / "idle.yaml"
    policy.write_text("minIdle: 1\n")
    done = demo(*["--policy", str(policy)] * 3, "--jobs", "1")
    assert done.returncode == 2
    assert "--policy takes at most two files" in done.stderr
