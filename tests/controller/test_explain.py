"""`gha-controller explain`'s report (controller/explain.py): every line a sentence, whatever the
timeline holds. Finding a job by its id, its workflow run and its name, against the emulators:
tests/controller/test_job_timeline.py."""

from __future__ import annotations

import pytest

from controller.explain import render
from shared.api import timeline as tl
from shared.typedefs import JSONDict

MOMENTS: JSONDict = {
    tl.JOB_ID: "6f1c",
    tl.WORKFLOW_RUN_ID: "9001",
    tl.JOB_NAME: "build (linux)",
    tl.RUNNER: "arc-runner-h4zd2",
    tl.RECEIVED: "2026-12-04T07:07:07.000Z",
    tl.RUNNER_CREATED: "2026-12-04T07:07:11.000Z",
    tl.JOB_STARTED: "2026-12-04T07:07:11.500Z",
    tl.CAPACITY: "1/1 maxRunners",
}


@pytest.mark.parametrize(
    ("skew", "last"),
    [
        (
            "0.003",
            "GitHub's clock read 0.003 s behind the listener's (the job offer's delivery "
            "included).",
        ),
        # Before: "GitHub clock vs the listener's: unmeasured s".
        (
            "unmeasured",
            "GitHub's clock was not measured against the listener's (the listener did not see "
            "the job offered), so GitHub's times are taken as the listener's.",
        ),
    ],
)
def test_every_line_is_a_sentence(skew: str, last: str) -> None:
    lines = render(tl.Timeline({**MOMENTS, tl.SKEW: skew})).splitlines()
    assert (
        lines[0]
        == 'Job 6f1c ("build (linux)" of workflow run 9001) ran on runner arc-runner-h4zd2.'
    )
    assert lines[1] == (
        "It was offered at 2026-12-04T07:07:07.000Z and started at 2026-12-04T07:07:11.500Z."
    )
    assert "  The capacity stage took 4.0 s." in lines
    assert "In all it waited 4.5 s." in lines
    assert lines[-2] == (
        "Most of the wait: 4 s waiting for capacity: 1/1 runners busy; raise maxRunners or see "
        "minIdle."
    )
    assert lines[-1] == last
    assert all(line.endswith(".") for line in lines)


def test_a_timeline_that_knows_little_still_reads() -> None:
    lines = render(tl.Timeline({tl.JOB_STARTED: "2026-12-04T07:07:11.500Z"})).splitlines()
    assert lines[0] == "Job (id unknown) ran on runner (unknown)."
    assert lines[1] == "It started at 2026-12-04T07:07:11.500Z; when it was offered is not known."
    assert lines[-2] == "Most of the wait: no timeline recorded."
