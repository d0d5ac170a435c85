"""bench/controller_restart.py at two runners, so the benchmark cannot rot: both controller
processes start, settle and report their memory."""

from __future__ import annotations

from bench.controller_restart import report, run


async def test_both_processes_settle_and_report_their_memory() -> None:
    steady, restarted = await run(runners=2, within=60.0)
    assert steady.idle_kib > 0
    assert steady.settled_kib > 0
    assert steady.peak_kib >= steady.settled_kib
    assert restarted.peak_kib >= restarted.settled_kib > 0
    assert "after a restart" in report(2, steady, restarted)
