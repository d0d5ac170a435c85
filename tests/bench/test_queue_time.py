"""bench/queue_time.py at a CI size, so the benchmark cannot rot: a cold burst of jobs through
the controller and listener processes, every job started, each job's stages adding up to its
queue time, and the configured latencies found in the stages that carry them."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from rich.console import Console

from bench.queue_time import STAGES, Result, report, run

pytestmark = pytest.mark.asyncio(loop_scope="module")

JOBS = 10
POD_START = 0.2
REGISTRATION = 0.1


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
        assert math.isclose(sum(record.stages.values()), record.queue_time, abs_tol=1e-9)


async def test_the_attribution_by_rank_keeps_every_stage_in_order(result: Result) -> None:
    """The service hands jobs out in queue order and binds the oldest job to the oldest idle
    runner, so the k-th of each record is never before the one the stage starts from."""
    assert result.out_of_order == 0
    assert all(s >= 0 for r in result.records for s in r.stages.values())


async def test_the_configured_latencies_are_in_the_stages_that_carry_them(result: Result) -> None:
    assert all(r.stages["pod start"] >= POD_START for r in result.records)
    assert all(r.stages["registration"] >= REGISTRATION for r in result.records)
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
