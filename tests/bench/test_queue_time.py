"""bench/queue_time.py at a CI size, so the benchmark cannot rot: a cold burst of jobs through
the controller and listener processes, every job started, each job's stages (read from the
JobTimeline Events the system writes, docs/job-timeline.md) adding up to its queue time as the
Actions emulator recorded it, and the configured latencies found in the stages that carry
them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from rich.console import Console

from bench.queue_time import STAGES, Result, report, run

pytestmark = pytest.mark.asyncio(loop_scope="module")

JOBS = 10
# Longer than the cluster's timestamps' resolution, so the stages that carry them show them.
POD_START = 1.5
REGISTRATION = 1.0
RESOLUTION = 1.0
"""The cluster's timestamps are whole seconds: a stage between two of them is exact to 1 s."""
DELIVERY = 0.5
"""The instrumentation ends a job's wait when the listener receives its JobStarted, the emulator
when it assigns the runner; and the JobAvailable's delivery is in the skew the listener measures.
Milliseconds on an idle machine (docs in bench/queue_time.py); room for a loaded one."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def result() -> AsyncIterator[Result]:
    yield await run(JOBS, pod_start_latency=POD_START, registration_latency=REGISTRATION)


async def test_every_job_of_the_burst_started(result: Result) -> None:
    assert len(result.records) == JOBS
    assert len({r.id for r in result.records}) == JOBS
    assert all(r.queue_time > 0 for r in result.records)


async def test_the_stages_of_each_job_add_up_to_its_queue_time(result: Result) -> None:
    for record in result.records:
        assert list(record.stages) == [name for name, _ in STAGES]
        assert abs(sum(record.stages.values()) - record.queue_time) <= DELIVERY
    assert result.delivery <= DELIVERY


async def test_no_stage_is_negative(result: Result) -> None:
    assert all(s >= 0 for r in result.records for s in r.stages.values())


async def test_the_configured_latencies_are_in_the_stages_that_carry_them(result: Result) -> None:
    for record in result.records:
        stages = record.stages
        assert abs(stages["container_start"] - POD_START) <= RESOLUTION + DELIVERY
        # From the container's start (whole seconds) to GitHub's assignment (milliseconds).
        assert REGISTRATION <= stages["registration"] <= REGISTRATION + RESOLUTION + DELIVERY
        pod_to_job = stages["scheduling"] + stages["container_start"] + stages["registration"]
        assert pod_to_job >= POD_START + REGISTRATION
        assert stages["capacity"] == 0, "maxRunners is the burst: no job waits for capacity"
    assert result.floor == pytest.approx(POD_START + REGISTRATION + result.poll_round_trip)
    assert min(result.queue_times()) >= result.floor


async def test_the_json_and_the_table_carry_every_stage(result: Result, tmp_path: Path) -> None:
    path = tmp_path / "queue.json"
    path.write_text(json.dumps(result.to_json()))
    figures = json.loads(path.read_text())
    console = Console(record=True, width=120)
    report(result, console)
    text = console.export_text()

    assert list(figures["stages"]) == [name for name, _ in STAGES]
    assert sum(s["share"] for s in figures["stages"].values()) == pytest.approx(1, abs=1e-3)
    assert len(figures["per_job"]) == JOBS
    assert figures["p50_over_floor"] >= 1
    assert all(name in text for name, _ in STAGES)
    assert "p50 / floor" in text
