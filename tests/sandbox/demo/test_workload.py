"""The demo's workloads: the same seed gives the same jobs, a trace replays as written, and a
trace that cannot be replayed is refused with its file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.demo.workload import (
    JobSpec,
    WorkloadError,
    burst,
    default_workload,
    digest,
    load_trace,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "sandbox" / "workloads" / "example.csv"


def test_the_default_workload_depends_on_its_seed_only() -> None:
    assert default_workload(7) == default_workload(7)
    assert digest(default_workload(7)) == digest(default_workload(7))
    assert digest(default_workload(7)) != digest(default_workload(8))


def test_the_default_workload_is_a_few_hundred_jobs_in_bursts_with_a_spread() -> None:
    jobs = default_workload(1)
    assert 240 <= len(jobs) <= 360
    durations = sorted(job.duration for job in jobs)
    assert durations[len(durations) // 2] < 90 < durations[-1]
    # Four bursts, each starting on its own 180 s boundary.
    assert {int(job.queued_at // 180) for job in jobs} >= {0, 1, 2, 3}
    assert {job.result for job in jobs} == {"succeeded", "failed"}


def test_a_burst_queues_every_job_at_once() -> None:
    assert burst(3, 12.5) == [JobSpec(0.0, 12.5)] * 3


def test_the_example_trace_replays_in_queue_order_and_the_same_every_time() -> None:
    jobs = load_trace(EXAMPLE)
    assert len(jobs) == 40
    assert [job.queued_at for job in jobs] == sorted(job.queued_at for job in jobs)
    assert jobs[0] == JobSpec(0.3, 73.6, "succeeded", ("linux", "x64"))
    assert digest(load_trace(EXAMPLE)) == digest(jobs)


def test_an_empty_result_means_succeeded_and_labels_may_be_empty(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("queued_at,duration,result,labels\n5,1,,\n0,2,failed,gpu\n")
    assert load_trace(trace) == [JobSpec(0.0, 2.0, "failed", ("gpu",)), JobSpec(5.0, 1.0)]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("at,duration,result,labels\n", ":1: the header must be queued_at,duration,result,labels"),
        ("queued_at,duration,result,labels\n", ": the trace has no job"),
        ("queued_at,duration,result,labels\n0,x,,\n", ":2: queued_at and duration must be numbers"),
        ("queued_at,duration,result,labels\n-1,1,,\n", ":2: queued_at and duration must not be"),
        ("queued_at,duration,result,labels\n0,1,ok,\n", ":2: result must be one of succeeded"),
    ],
)
def test_a_bad_trace_names_its_file_and_line(tmp_path: Path, text: str, error: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(text)
    with pytest.raises(WorkloadError, match=f"^{trace}{error}"):
        load_trace(trace)
