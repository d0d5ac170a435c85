"""`gha-sandbox demo` through its real entry point: a short workload through the real
`gha-controller` and `gha-listener` processes against both emulators, judged by its JSON report.
In-cluster (the default) the Kubernetes emulator's kubelet runs them from `manifests/` and the
listener pod the controller makes; `--listener docker-run` runs them as the demo's subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.demo.cluster import CONTROLLER_NAMESPACE, INSTALL, LISTENER_USER, install_manifests
from sandbox.demo.workload import digest, load_trace
from shared.api.timeline import STAGES


def demo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox", "demo", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def assert_each_job_ran_on_a_runner_of_its_own(runners: dict[str, Any], jobs: int) -> None:
    """A runner whose job is done is deleted without a `Succeeded` status write
    (docs/reconcilers.md#a-runner-that-succeeded). A runner may also be made and then removed
    idle: the set replaces a finished runner while the listener has not yet read the job's
    `JobCompleted` and still asks for it, as ARC's does (docs/reconcilers.md#replicas-lag-the-jobs).
    Such a runner never ran a job; every job ran on a runner of its own."""
    lifecycles = dict(runners["lifecycles"])
    assert lifecycles.pop("New>Pending>Running>deleted") == jobs
    assert set(lifecycles) <= {"New>Pending>deleted"}
    assert runners["created"] == jobs + sum(lifecycles.values())


def test_a_short_workload_completes_in_cluster_with_every_invariant_held(tmp_path: Path) -> None:
    """By default the controller runs from manifests/ (its Deployment, run by the kubelet) and
    the listener as the pod the controller makes for the example AutoscalingRunnerSet. Every job
    completes on a runner that went New -> Pending -> Running (written by the listener pod's
    ServiceAccount) -> Succeeded -> deleted; nothing is killed, violated or left over once the
    set is deleted (listener, its pod, Secrets, Role, RoleBinding, ServiceAccount; the scale set
    and sessions on the service), the temporary workdir is removed, and the summary and the plot
    are written."""
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
    assert report["options"]["listener"] == "in-cluster"
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
    assert_each_job_ran_on_a_runner_of_its_own(runners, jobs=4)
    identity = report["components"]["listener_identity"]
    assert identity.startswith(f"system:serviceaccount:{CONTROLLER_NAMESPACE}:demo-runners-")
    assert identity != LISTENER_USER
    assert runners["running_written_by"] == {identity: 4}
    # maxRunners of the AutoscalingRunnerSet bounds what the listener asks for and what exists.
    assert runners["max_desired"] == 3
    assert runners["max_concurrent"] <= 3
    assert set(report["reconciles_per_runner"]) == {
        "autoscalinglistener",
        "autoscalingrunnerset",
        "ephemeralrunner",
        "ephemeralrunnerset",
        "runnernamespace",
    }
    # What woke each controller, by cause (docs/sandbox.md#summary-and-report).
    assert report["wakes_per_runner"]["ephemeralrunner"]["ephemeralrunner add"] > 0
    assert report["queue_time_s"]["max"] >= report["queue_time_s"]["p50"] > 0
    assert report["api_calls_per_job"]["kubernetes_by_identity"]["listener"] > 0
    assert report["components"]["exit_codes"] == {"listener": 0, "controller": 0}
    assert report["components"]["crash"] is None
    assert report["ok"] is True
    assert "busy runners killed" in done.stdout
    assert "result: ok" in done.stdout
    assert plot_path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert list(tmp.iterdir()) == []


@pytest.mark.anywhere
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_installed_manifests_are_what_kubectl_kustomize_renders() -> None:
    """The demo applies manifests/ without kubectl; what it applies must be what
    `kubectl apply -k manifests/` would (images and the listener image replacement included)."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(INSTALL.parent)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout

    def key(doc: dict[str, Any]) -> tuple[str, str, str]:
        return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]

    expected = sorted((d for d in yaml.safe_load_all(rendered) if d), key=key)
    assert sorted(install_manifests({}), key=key) == expected


@pytest.mark.anywhere
def test_a_trace_that_cannot_be_read_stops_at_start_with_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("queued_at,duration,result,labels\n0,ten,succeeded,\n")
    done = demo("--trace", str(trace))
    assert done.returncode == 2
    assert done.stderr == f"gha-sandbox demo: {trace}:2: queued_at and duration must be numbers\n"


def test_a_trace_replays_with_its_labels_and_results(tmp_path: Path) -> None:
    """Through the docker-run path (controller and listener as the demo's subprocesses): jobs
    with runs-on labels route to the set (its labels are the trace's); a job the trace says
    fails is reported failed, not lost; the invariants hold with Running written by the
    gha-listener ServiceAccount and nothing is left over."""
    trace, report_path = tmp_path / "trace.csv", tmp_path / "report.json"
    trace.write_text(
        "queued_at,duration,result,labels\n"
        "0,10,succeeded,linux x64\n"
        "20,10,failed,linux x64 docker\n"
        "40,5,,\n"
    )
    done = demo(
        "--trace", str(trace), "--seed", "3", "--report", str(report_path),
        "--listener", "docker-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["options"]["listener"] == "docker-run"
    assert report["leftovers"] == {"kubernetes": [], "actions": []}
    assert report["invariant_violations"] == []
    runners = report["runners"]
    assert_each_job_ran_on_a_runner_of_its_own(runners, jobs=3)
    assert runners["running_written_by"] == {LISTENER_USER: 3}
    assert report["components"]["exit_codes"] == {"listener": 0, "controller": 0}
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
    # Every job's wait split into the stages of docs/job-timeline.md, none held at maxRunners.
    assert report["stage_split_jobs"] == 3
    # Nothing skipped (issue 43): each job's timeline kept, each busy pod protected.
    assert report["nothing_skipped"] == {
        "explained_jobs_per_job": 1.0,
        "busy_protected_per_busy_runner": 1.0,
    }
    assert list(report["stage_split_s"]) == list(STAGES)
    assert report["stage_split_s"]["capacity"]["max"] == 0
    assert report["jobs_waited_at_max_runners"] == 0
    assert sum(split["max"] for split in report["stage_split_s"].values()) > 0


def test_a_component_that_crashes_is_reported_with_its_log_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """A controller that cannot start (a setting it rejects) ends the run: the demo shows the
    end of its log, exits non-zero, and removes its temporary directory. docker-run: the
    controller there inherits the demo's environment, which is how the bad setting gets in."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = demo(
        "--jobs", "1", "--listener", "docker-run",
        env={"TMPDIR": str(tmp), "GHA_CONTROLLER_WORKERS": "0"},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "controller exited with code 2; the end of its log:" in done.stdout
    assert "workers" in done.stdout
    assert "result: FAILED: 1 job(s) did not complete; controller exited with code 2" in done.stdout
    assert list(tmp.iterdir()) == []


def test_a_controller_that_crashes_in_cluster_is_reported_with_its_pod_log(
    tmp_path: Path,
) -> None:
    """In-cluster the demo's GHA_CONTROLLER_* variables go into the controller's Deployment, as
    a docker-run controller inherits them; a controller pod whose process exits non-zero ends
    the run with the tail of that pod's log, and the run leaves nothing behind."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = demo("--jobs", "1", env={"TMPDIR": str(tmp), "GHA_CONTROLLER_WORKERS": "0"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "controller exited with code 2; the end of its log:" in done.stdout
    assert "workers" in done.stdout
    assert "result: FAILED: 1 job(s) did not complete; controller exited with code 2" in done.stdout
    assert list(tmp.iterdir()) == []
