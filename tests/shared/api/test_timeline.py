"""The stage rules of a job's timeline (docs/job-timeline.md#stages): consecutive moments, a
missing one merged into the next stage, an earlier one clamped, capacity named."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.api import timeline as tl


def at(seconds: float) -> str:
    return f"2026-01-01T00:{int(seconds) // 60:02d}:{seconds % 60:06.3f}Z"


FULL = {
    tl.RECEIVED: at(0),
    tl.DESIRED_WRITTEN: at(0.5),
    tl.RUNNER_CREATED: at(1),
    tl.POD_CREATED: at(2),
    tl.POD_SCHEDULED: at(5),
    tl.CONTAINER_STARTED: at(15),
    tl.RUNNER_ASSIGNED: at(18),
    tl.JOB_STARTED: at(18.25),
}


STAGE_SECONDS = {
    "listener": 0.5,
    "controller": 1.5,
    "scheduling": 3.0,
    "container_start": 10.0,
    "registration": 3.0,
    "job_start": 0.25,
}


def stages(moments: dict[str, str]) -> dict[str, float]:
    return {stage.name: stage.seconds for stage in tl.Timeline(dict(moments)).stages()}


def test_each_stage_is_the_gap_between_consecutive_moments() -> None:
    assert stages(FULL) == STAGE_SECONDS
    timeline = tl.Timeline(dict(FULL, jobId="j1"))
    assert timeline.total_seconds() == 18.25
    assert timeline.explanation() == (
        "10 s in container_start: the runner container took long to start "
        "(image pull, init containers)"
    )
    assert timeline.describe().startswith("job j1 waited 18.2s: listener 0.5s, controller 1.5s")


def test_a_missing_moment_merges_its_stage_into_the_next() -> None:
    moments = {k: v for k, v in FULL.items() if k != tl.POD_SCHEDULED}
    assert stages(moments)["container_start"] == 13.0
    assert "scheduling" not in stages(moments)


def test_an_idle_runner_taking_the_job_has_no_cluster_stages() -> None:
    moments = dict(FULL)
    for key, value in ((tl.RUNNER_CREATED, -60), (tl.POD_CREATED, -59), (tl.POD_SCHEDULED, -59)):
        moments[key] = f"2025-12-31T23:59:{60 + value:02d}.000Z"
    moments[tl.CONTAINER_STARTED] = "2025-12-31T23:59:30.000Z"
    got = stages(moments)
    assert got["controller"] == got["scheduling"] == got["container_start"] == 0
    assert got["registration"] == 17.5
    # Each of the four cluster moments is before the one the stage starts from: taken as equal.
    assert tl.Timeline(moments).clamped() == 4
    assert tl.Timeline(dict(FULL)).clamped() == 0


@pytest.mark.parametrize(
    ("capacity", "why"),
    [
        ("30/30 maxRunners", "30/30 runners busy; raise maxRunners or see minIdle"),
        ("2/5 policy", "the scaling policy held the set at 2/5 runners (docs/policies.md)"),
    ],
)
def test_a_job_held_back_waits_for_capacity(capacity: str, why: str) -> None:
    moments = dict(FULL, capacity=capacity)
    moments[tl.RUNNER_CREATED] = at(87.5)
    moments[tl.POD_CREATED] = at(88)
    timeline = tl.Timeline(moments)
    got = stages(moments)
    assert got["capacity"] == 87.0
    assert got["controller"] == 0.5
    assert timeline.explanation() == f"87 s waiting for capacity: {why}"


def test_the_event_annotation_round_trips() -> None:
    timeline = tl.Timeline(dict(FULL, jobId="j1"))
    assert tl.Timeline.from_json(timeline.to_json()) == timeline


def exported(stages: tuple[str, ...], name: str) -> list[ReadableSpan]:
    """The spans one process exports for FULL's job: its own provider, as in its own process."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tl.Timeline(dict(FULL, jobId="j1", runner="r1")).trace_spans(
        provider.get_tracer("test"), name=name, stages=stages
    )
    return list(exporter.get_finished_spans())


def test_the_listener_and_the_controller_trace_one_job_in_one_trace() -> None:
    listener = exported(tl.LISTENER_STAGES, "job")
    controller = exported(tl.CONTROLLER_STAGES, "runner")
    spans = listener + controller
    assert {span.context.trace_id for span in spans if span.context} == {tl.trace_id_of("j1")}
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"job", "runner", *(f"stage {stage}" for stage in STAGE_SECONDS)}
    for stage, seconds in STAGE_SECONDS.items():
        span = by_name[f"stage {stage}"]
        assert span.end_time is not None
        assert span.start_time is not None
        assert (span.end_time - span.start_time) / 1e9 == pytest.approx(seconds)
        outer = by_name["job" if stage in tl.LISTENER_STAGES else "runner"]
        assert span.parent is not None
        assert outer.context is not None
        assert span.parent.span_id == outer.context.span_id
    # Both processes' spans hang from the same (unexported) root of the job.
    assert by_name["job"].parent == by_name["runner"].parent
    assert by_name["job"].attributes == {"gha.job_id": "j1", "gha.runner": "r1"}
    assert by_name["stage scheduling"].start_time == int(
        tl.parse_moment(FULL[tl.POD_CREATED]).timestamp() * 1e9
    )


@pytest.mark.parametrize(
    "annotation",
    ["[" * 100_000 + "]" * 100_000, "{not json", '{"a": NaN}', "[1, 2]", "x" * 300_000],
    ids=["nested", "broken", "nan", "array", "over-the-cap"],
)
def test_a_hostile_timeline_annotation_is_an_empty_timeline(annotation: str) -> None:
    """Anyone who may write Events may write the annotation `gha-controller explain` reads."""
    assert tl.Timeline.from_json(annotation).moments == {}
