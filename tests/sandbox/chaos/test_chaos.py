"""The chaos suite: each fault mix through `gha-sandbox demo --chaos` at a small size, judged by
its JSON report: every kind of the mix fired, no invariant was violated, every job of the
workload completed (a job a fault killed was retried), and nothing was left over.

The runs start together (module fixture) and each test waits for its own, so the suite takes
about as long as its slowest run. The controllers' lease is shortened (4 s instead of 15 s) so
that a leader failover does not dominate the run; RELIABILITY.md has the full run's figures with
the default lease.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.demo.chaos import MIXES

JOBS = 10
SHORT_LEASE = {
    "GHA_CONTROLLER_LEASE_DURATION": "4",
    "GHA_CONTROLLER_RENEW_DEADLINE": "3",
    "GHA_CONTROLLER_RETRY_PERIOD": "1",
}
SHRUNK_WATCH = {
    "GHA_CONTROLLER_WATCH_RETRY_MAX": "2",
    "GHA_CONTROLLER_WATCH_INACTIVITY_TIMEOUT": "2",
}
"""The control-plane outage lasts 1.5 retry maxima and the quiet after it 1.5 inactivity
timeouts (sandbox/demo/chaos.py): shrunk from 30 and 70 s so the run takes as long as the others;
RELIABILITY.md has the run at full size."""
# (run name, mix, extra flags): every named mix in-cluster (the default), and the processes mix
# under docker-run too, where a kill is a real SIGKILL and the sandbox restarts the process.
RUNS = [(mix, mix, ()) for mix in MIXES if mix != "all"] + [
    ("processes-docker-run", "processes", ("--listener", "docker-run"))
]
ENV = {"control-plane": SHRUNK_WATCH}


class Run:
    def __init__(self, name: str, mix: str, extra: tuple[str, ...], tmp: Path) -> None:
        self.mix = mix
        self.report_path = tmp / f"{name}.json"
        self.out = (tmp / f"{name}.out").open("w+")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "sandbox", "demo",
                "--jobs", str(JOBS), "--duration", "20", "--max-runners", "4",
                "--chaos", mix, "--chaos-rate", "4", "--report", str(self.report_path),
                *extra,
            ],
            stdout=self.out,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **SHORT_LEASE, **ENV.get(name, {})},
        )  # fmt: skip

    def result(self) -> tuple[int, dict[str, Any], str]:
        code = self.proc.wait()
        self.out.seek(0)
        output = self.out.read()
        report = json.loads(self.report_path.read_text()) if self.report_path.exists() else {}
        return code, report, output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    tmp = tmp_path_factory.mktemp("chaos")
    started = {name: Run(name, mix, extra, tmp) for name, mix, extra in RUNS}
    yield started
    for run in started.values():
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        run.out.close()


@pytest.mark.parametrize("name", [name for name, _, _ in RUNS])
def test_a_fault_mix_breaks_no_invariant_loses_no_job_and_leaves_nothing(
    runs: dict[str, Run], name: str
) -> None:
    run = runs[name]
    code, report, output = run.result()
    assert code == 0, output[-3000:]
    faults = report["faults"]
    assert set(faults["injected"]) == set(MIXES[run.mix]), faults
    assert report["invariant_violations"] == []
    assert report["jobs"]["completed"] == JOBS
    assert report["jobs"]["lost"] == 0
    assert report["runners"]["killed_while_busy"] == 0
    assert report["leftovers"] == {"kubernetes": [], "actions": []}
    assert report["components"]["crash"] is None
    assert report["recovery_time_s"] is not None
    # Every job a fault killed was queued again and that copy completed.
    assert faults["jobs_retried"] == faults["jobs_killed_by_faults"]
    assert report["jobs"]["enqueued"] == JOBS + faults["jobs_retried"]
    if "node-lost" in faults["injected"]:
        assert faults["jobs_killed_by_faults"] >= 1
    if "listener-kill" in faults["injected"]:
        assert faults["restarts"]["listener"] == faults["injected"]["listener-kill"]
    if "control-plane-outage" in faults["injected"]:
        # The first outage comes while the burst's jobs wait: the time from the server's
        # return to the next runner is measured (its size: RELIABILITY.md, at full size; the
        # informers' part of it: tests/controller/test_outage.py).
        timing = faults["outage_to_first_runner_s"]
        assert timing["n"] >= 1, timing


@pytest.mark.anywhere
def test_an_unknown_mix_stops_the_demo_at_start_with_the_known_ones() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sandbox", "demo", "--chaos", "kube-api,meteor"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown fault mix 'meteor': one of kube-api, kube-watch" in done.stderr
