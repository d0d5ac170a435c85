"""bench/controller_scale.py at three runners, so the benchmark cannot rot: every runner comes
up, runs a job and goes, and the per-runner counts it reports stay within ARC's figures
(docs/reconcilers.md#arcs-figures, the constants in the benchmark)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from bench.controller_scale import (
    ARC_CONTROLLER_KUBE,
    ARC_CONTROLLER_SECRET_GETS,
    ARC_RECONCILES,
    ARC_SCALE_UP_CONTROLLER_KUBE,
    Result,
    comparison,
    report,
    run,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

RUNNERS = 3


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def result() -> AsyncIterator[Result]:
    yield await run(runners=RUNNERS, jobs=True, job_seconds=1.0, within=60.0)


async def test_each_runner_is_created_once_and_no_refill_follows_the_jobs(result: Result) -> None:
    assert [(p.name, p.runners_created) for p in result.phases] == [
        ("scale-up", RUNNERS),
        ("jobs", 0),
    ]


async def test_the_report_counts_every_job_explained_and_every_runner_busy(
    result: Result,
) -> None:
    """Issue 43's "nothing skipped under lag" ratios, read by the bench from the emulator's
    store: each job's runner has its `JobTimeline` Event."""
    jobs = result.phases[1].counts.skipped
    assert (jobs["jobs"], jobs["explained"], jobs["busy"]) == (RUNNERS, RUNNERS, RUNNERS)
    assert jobs["protected"] <= jobs["busy"]
    # The listener promotes within the 1 s job for some runners at least; the protection ratio
    # that matters is over those (a runner promoted after its job ended needs none).
    assert 1 <= jobs["busy_running"] <= jobs["busy"]
    assert jobs["protected_running"] <= min(jobs["protected"], jobs["busy_running"])
    text = report(result)
    assert f"explained jobs / jobs: {RUNNERS} / {RUNNERS} = 1.00" in text
    assert "of those busy while their pod ran: " in text


async def test_only_the_github_config_secret_is_read(
    result: Result,
) -> None:
    """ARC reads the JIT Secret on every pass. This read it once per runner, before
    registration, where it could only answer 404 (the runners were made by this process): no
    longer."""
    counts = result.lifecycle()
    assert counts.kube_errors["controller get secrets 404"] == 0
    assert counts.kube["controller get secrets"] == 1


async def test_one_jit_config_and_one_removal_per_runner(result: Result) -> None:
    actions = result.lifecycle().actions
    assert (actions["controller generate_jit_config"], actions["controller remove_runner"]) == (
        RUNNERS,
        RUNNERS,
    )


@pytest.mark.parametrize(
    ("what", "arc_min"),
    [
        ("controller Kubernetes requests", ARC_CONTROLLER_KUBE[0]),
        ("controller Secret GETs", ARC_CONTROLLER_SECRET_GETS[0]),
        ("ephemeralrunner reconciles", ARC_RECONCILES["ephemeralrunner"][1]),
        ("ephemeralrunnerset reconciles", ARC_RECONCILES["ephemeralrunnerset"][1]),
    ],
)
async def test_per_runner_lifecycle_count_is_within_arcs(
    result: Result, what: str, arc_min: int
) -> None:
    rows = {row[0]: row[1] for row in comparison(result)}
    assert 0 < rows[what] <= arc_min, rows


async def test_scale_up_alone_costs_less_than_arcs_scale_up(result: Result) -> None:
    scale_up = Result(runners=RUNNERS, controller_process=False, phases=result.phases[:1])
    [(what, per_runner, _), _] = comparison(scale_up)
    assert what == "controller Kubernetes requests, scale-up"
    assert 0 < per_runner < ARC_SCALE_UP_CONTROLLER_KUBE[0]


async def test_the_report_names_every_phase_and_comparison(result: Result) -> None:
    text = report(result)
    assert "[scale-up]" in text
    assert "[jobs]" in text
    assert all(row[0] in text for row in comparison(result))


async def test_the_garbage_collector_reads_then_deletes_each_pod_and_jit_secret(
    result: Result,
) -> None:
    """The pods and JIT Secrets go with their runner through kube-controller-manager's garbage
    collector, counted as it sends its requests: a GET and a DELETE per dependent."""
    gc = {k: v for k, v in result.lifecycle().kube.items() if k.startswith("gc ")}
    assert gc == {
        "gc get pods": RUNNERS,
        "gc delete pods": RUNNERS,
        "gc get secrets": RUNNERS,
        "gc delete secrets": RUNNERS,
    }


async def test_the_busy_budget_costs_the_disruption_controller_status_updates(
    result: Result,
) -> None:
    """kube-controller-manager's disruption controller updates the set's busy-pod budget's
    status when a pod it selects comes or goes (the busy label added; the pod no longer Ready;
    the pod gone), counted under its own name: at most 3 per protected pod, fewer when one sync
    serves several changes."""
    counts = result.lifecycle()
    disruption = {k: v for k, v in counts.kube.items() if k.startswith("disruption ")}
    assert set(disruption) <= {"disruption update poddisruptionbudgets/status"}
    updates = sum(disruption.values())
    protected = result.phases[1].counts.skipped["protected"]
    assert (updates > 0) == (protected > 0)
    assert updates <= 3 * protected
    assert not any(k.startswith("other ") for k in counts.kube), counts.kube


async def test_every_process_of_the_system_reports_its_cpu(result: Result) -> None:
    scale_up, jobs = result.phases
    assert {"kube process", "actions process"} <= scale_up.counts.cpu.keys()
    assert "listener process" in jobs.counts.cpu


async def test_runners_coming_online_check_no_waiting_runner(result: Result) -> None:
    """The scale-up wakes nobody in the Actions emulator: each simulated runner waits on its own
    key, which only a job for it touches; the jobs phase checks the runners it binds."""
    scale_up, jobs = result.phases
    assert scale_up.counts.metric("actions_emulator_waiter_checks", "all") == 0
    assert jobs.counts.metric("actions_emulator_waiter_checks", "all") > 0
