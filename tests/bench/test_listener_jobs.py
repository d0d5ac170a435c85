"""bench/listener_jobs.py at a CI size, so the benchmark cannot rot: a burst of jobs on warm
runners, every runner promoted to Running before its job completed, one GET and one status
patch per job."""

from __future__ import annotations

from bench.listener_jobs import run

JOBS = 20


async def test_a_burst_promotes_every_runner_before_its_job_completes() -> None:
    result = await run(JOBS, job_seconds=2.0, long_poll_seconds=1.0)
    assert result.running_seen == JOBS
    assert result.promoted_after_completion == 0
    assert result.kube_calls["get ephemeralrunners"] == JOBS
    assert result.kube_calls["patch ephemeralrunners/status"] == JOBS
    assert len(result.latencies_ms) == JOBS


async def test_a_promotion_after_the_job_completed_is_counted() -> None:
    """Jobs that end as soon as they start: the listener can only write Running after the
    fact, and the benchmark must say so (its zero above would mean nothing otherwise)."""
    result = await run(5, job_seconds=0.0, long_poll_seconds=1.0)
    assert result.running_seen == 5
    assert result.promoted_after_completion > 0
