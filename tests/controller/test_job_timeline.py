"""Every job's wait explained (docs/job-timeline.md): the listener (in this loop) and both runner
controllers over the Kubernetes emulator, whose kubelet runs the Actions emulator's simulated
runners. Each stage's duration is what the emulators were told to take, the `JobTimeline` Event
keeps it, `gha-controller explain` reads it back, and the listener's metrics count it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controller import app
from controller.explain import find_timeline, find_timelines, render
from listener.app import credentials_of, serve
from listener.config import ListenerSettings
from shared.api import timeline as tl
from shared.kube.objects import EVENT
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions, metric
from tests.listener.conftest import Collector, otlp_collector  # noqa: F401 (a fixture)

# Timestamps of the cluster are whole seconds: a stage measured between two of them is off by
# up to one second either way.
RESOLUTION = 1.0
POD_START_LATENCY = 4.0
REGISTRATION_LATENCY = 1.5
JOB_DURATION = 4.0
WITHIN = 30.0


@asynccontextmanager
async def running_listener(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, max_runners: int
) -> AsyncIterator[int]:
    """`gha-listener` for the set `arc` with its own RBAC; yields its metrics port."""
    await rig.as_listener("arc")
    kubeconfig = tmp_path / "listener.kubeconfig"
    rig.kube.write_kubeconfig(
        kubeconfig, token=rig.kube.service_account_token(rig.namespace, "gha-listener")
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings = ListenerSettings(
        configure_url=rig.config_url,
        github_token=rig.gh.add_pat(),
        ephemeral_runner_set_namespace=rig.namespace,
        ephemeral_runner_set_name="arc",
        runner_scale_set_id=rig.scale_set_id,
        runner_scale_set_name="arc",
        min_runners=0,
        max_runners=max_runners,
        metrics_addr="127.0.0.1:0",
        retry_initial_seconds=0.01,
        retry_max_seconds=0.1,
        long_poll_timeout_seconds=5,
        kube_request_timeout_seconds=2,
    )
    stop = asyncio.Event()
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(settings, credentials_of(settings), stop=stop, on_listening=port.set_result)
    )
    try:
        yield await asyncio.wait_for(port, WITHIN)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, WITHIN) == 0


async def listener_metrics(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()


async def recorded_timeline(rig: Rig, job_id: str) -> tl.Timeline:
    """The job's timeline from its `JobTimeline` Event, once the controller has written it."""

    async def from_event() -> tl.Timeline | None:
        for event in (await rig.objects.list(EVENT, rig.namespace))["items"]:
            annotation = (event["metadata"].get("annotations") or {}).get(tl.EVENT_ANNOTATION)
            if event["reason"] == tl.EVENT_REASON and annotation:
                timeline = tl.Timeline.from_json(annotation)
                if timeline.moments.get(tl.JOB_ID) == job_id:
                    return timeline
        return None

    found: tl.Timeline = await rig.until(from_event, within=WITHIN, what=f"job {job_id}'s Event")
    return found


def seconds(timeline: tl.Timeline) -> dict[str, float]:
    return {stage.name: stage.seconds for stage in timeline.stages()}


def job_id_of(rig: Rig, request_id: int) -> str:
    return str(rig.gh.state.jobs[request_id].job_id)


SLOW_POD = RigOptions(
    simulated_runners=True,
    pod_start_latency=POD_START_LATENCY,
    registration_latency=REGISTRATION_LATENCY,
)


@pytest.mark.parametrize("rig_options", [SLOW_POD])
async def test_a_slow_pod_start_is_the_stage_that_dominates(
    rig: Rig,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    otlp_collector: Collector,  # noqa: F811 (the fixture imported above)
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    await rig.create_runner_set()
    async with running_listener(rig, tmp_path, monkeypatch, max_runners=2) as port:
        request = rig.gh.enqueue_job(labels=["arc"], duration=60)
        job_id = job_id_of(rig, request)
        timeline = await recorded_timeline(rig, job_id)
        stages = seconds(timeline)
        assert abs(stages[tl.STAGE_CONTAINER_START] - POD_START_LATENCY) <= RESOLUTION
        # From the container's start (whole seconds) to GitHub's assignment (milliseconds).
        registration = stages[tl.STAGE_REGISTRATION]
        assert REGISTRATION_LATENCY <= registration <= REGISTRATION_LATENCY + RESOLUTION + 0.5
        assert tl.STAGE_CAPACITY not in stages
        dominant = timeline.dominant()
        assert dominant is not None
        assert dominant.name == tl.STAGE_CONTAINER_START

        # The same timeline in kubectl describe's Events, and in explain, by job and by runner.
        runner = str(timeline.moments[tl.RUNNER])
        [event] = [
            e
            for e in (await rig.objects.list(EVENT, rig.namespace))["items"]
            if e["reason"] == tl.EVENT_REASON
        ]
        assert event["involvedObject"]["name"] == runner
        assert event["message"] == timeline.describe()
        assert "in container_start: the runner container took long to start" in event["message"]
        by_job = await find_timeline(rig.objects, what="job", ident=job_id, namespace=None)
        by_runner = await find_timeline(
            rig.objects, what="runner", ident=runner, namespace=rig.namespace
        )
        assert by_job == by_runner == timeline
        report = render(timeline)
        # Sentences (issue 41): before, "job <id> on runner <r>" and "dominated by: ...".
        run_id = str(timeline.moments[tl.WORKFLOW_RUN_ID])
        name = str(timeline.moments[tl.JOB_NAME])
        assert report.splitlines()[0] == (
            f'Job {job_id} ("{name}" of workflow run {run_id}) ran on runner {runner}.'
        )
        assert all(line.endswith(".") for line in report.splitlines())
        assert "Most of the wait: " in report
        assert "in container_start" in report
        # Found by what a user sees of the job in GitHub: the run's id, and the job's name.
        by_run = await find_timelines(rig.objects, what="job", ident=run_id, namespace=None)
        named = await find_timelines(
            rig.objects, what="job", ident=run_id, namespace=None, name=name
        )
        assert by_run == named == [timeline]
        assert not await find_timelines(
            rig.objects, what="job", ident=run_id, namespace=None, name="another job"
        )

        # The listener wrote the same moments into the runner's status, with no request of
        # its own, and counted each stage.
        live = await rig.runner(runner)
        assert live is not None
        written = live["status"][tl.TIMELINE_FIELD]
        assert written[tl.JOB_STARTED] == timeline.moments[tl.JOB_STARTED]
        assert written[tl.CONTAINER_STARTED] == timeline.moments[tl.CONTAINER_STARTED]
        text = await listener_metrics(port)
        assert (
            metric(
                text, "gha_job_stage_duration_seconds_count", stage="container_start", name="arc"
            )
            == 1
        )
        assert metric(text, "gha_jobs_waited_at_max_runners_total") == 0

    # The listener's spans of the job, in the job's own trace, at the stages' times.
    spans = {
        span.name: span
        for span in otlp_collector.spans()
        if span.trace_id == tl.trace_id_of(job_id).to_bytes(16, "big")
    }
    assert set(spans) == {"job", "stage listener", "stage registration", "stage job_start"}
    registration = spans["stage registration"]
    seconds_traced = (registration.end_time_unix_nano - registration.start_time_unix_nano) / 1e9
    assert seconds_traced == pytest.approx(stages[tl.STAGE_REGISTRATION], abs=1e-6)

    # What the timeline costs: one Event create by the controller; the listener's requests on
    # the runner are its JobStarted read and status patch, as without the timeline.
    requests = rig.kube.requests
    listener = f"system:serviceaccount:{rig.namespace}:gha-listener"
    assert requests.count(verb="create", resource="events", user=CONTROLLER_USER) == 1
    assert requests.count(resource="ephemeralrunners", user=listener) == 2
    assert requests.count(verb="get", resource="ephemeralrunners", user=listener) == 1

    # The command line, as a user runs it.
    kubeconfig = tmp_path / "admin.kubeconfig"
    rig.kube.write_kubeconfig(kubeconfig)
    argv = ["explain", "runner", runner, "-n", rig.namespace, "--kubeconfig", str(kubeconfig)]
    assert await asyncio.to_thread(app.main, argv) == 0
    assert capsys.readouterr().out == render(timeline) + "\n"
    argv = ["explain", "job", run_id, name, "--kubeconfig", str(kubeconfig)]
    assert await asyncio.to_thread(app.main, argv) == 0
    assert capsys.readouterr().out == render(timeline) + "\n"
    argv = ["explain", "job", "no-such-job", "--kubeconfig", str(kubeconfig)]
    assert await asyncio.to_thread(app.main, argv) == 1
    assert "no timeline recorded for job no-such-job" in capsys.readouterr().err


@pytest.mark.parametrize("rig_options", [RigOptions(simulated_runners=True)])
async def test_a_job_held_at_max_runners_waits_for_capacity(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.create_runner_set()
    async with running_listener(rig, tmp_path, monkeypatch, max_runners=1) as port:
        first = rig.gh.enqueue_job(labels=["arc"], duration=JOB_DURATION)
        second = rig.gh.enqueue_job(labels=["arc"], duration=60)
        held = await recorded_timeline(rig, job_id_of(rig, second))
        ran = await recorded_timeline(rig, job_id_of(rig, first))

        assert held.capacity == "1/1 maxRunners"
        assert not ran.capacity
        waited = seconds(held)[tl.STAGE_CAPACITY]
        # The second job's runner is made once the first job's runner is done: the first job's
        # duration after its start, plus the runner's own start.
        assert waited >= JOB_DURATION - RESOLUTION
        assert waited <= JOB_DURATION + ran.total_seconds() + 2 * RESOLUTION
        dominant = held.dominant()
        assert dominant is not None
        assert dominant.name == tl.STAGE_CAPACITY
        assert held.explanation() == (
            f"{waited:.0f} s waiting for capacity: 1/1 runners busy; "
            "raise maxRunners or see minIdle"
        )
        report = render(held)
        assert "Most of the wait: " in report
        assert "raise maxRunners" in report

        text = await listener_metrics(port)
        assert metric(text, "gha_jobs_waited_at_max_runners_total", name="arc") == 1
        assert metric(text, "gha_job_stage_duration_seconds_count", stage="capacity") == 1


@pytest.fixture
def exporting(otlp_collector: Collector, monkeypatch: pytest.MonkeyPatch) -> Collector:  # noqa: F811
    """OTLP export switched on before the rig's controller is built, flushed every 50 ms."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    return otlp_collector


def attributes_of(span: Any) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in span.attributes}


@pytest.mark.parametrize("rig_options", [RigOptions(simulated_runners=True)])
async def test_the_runners_reconcile_passes_are_in_the_jobs_trace(
    exporting: Collector, rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.create_runner_set()
    async with running_listener(rig, tmp_path, monkeypatch, max_runners=1):
        request = rig.gh.enqueue_job(labels=["arc"], duration=1)
        job_id = job_id_of(rig, request)
        timeline = await recorded_timeline(rig, job_id)
        runner = str(timeline.moments[tl.RUNNER])
        trace_id = tl.trace_id_of(job_id).to_bytes(16, "big")

        async def passes_after_the_job_ended() -> list[Any]:
            # The job runs for a second: the passes on the finished runner come after the one
            # that saw its JobStarted.
            in_trace = [s for s in exporting.spans() if s.trace_id == trace_id]
            passes = [s for s in in_trace if s.name == "reconcile ephemeralrunner"]
            names = {s.name for s in in_trace}
            done = await rig.runner(runner) is None
            return passes if done and len(passes) >= 2 and {"job", "runner"} <= names else []

        passes = await rig.until(passes_after_the_job_ended, within=WITHIN, what="the passes")

    # Every pass in the job's trace is on its runner, a child of the job's root as the
    # listener's `job` span and the controller's `runner` span are, with its result.
    [job_span] = [s for s in exporting.spans() if s.name == "job" and s.trace_id == trace_id]
    for span in passes:
        attributes = attributes_of(span)
        assert attributes["gha.runner"] == runner
        assert attributes["gha.job_id"] == job_id
        assert attributes["controller"] == "ephemeralrunner"
        assert attributes["name"] == runner
        assert attributes["namespace"] == rig.namespace
        assert attributes["result"] in {"success", "requeue_after"}
        assert span.parent_span_id == job_span.parent_span_id
    # The passes before the job was known (creating the runner, its pod) are found by the
    # runner's name, each in a trace of its own.
    earlier = [
        s
        for s in exporting.spans()
        if s.name == "reconcile ephemeralrunner"
        and s.trace_id != trace_id
        and attributes_of(s).get("gha.runner") == runner
    ]
    assert earlier
    assert all("gha.job_id" not in attributes_of(s) for s in earlier)
