"""Fuzzing the listener's message handling through the wire: hypothesis draws sequences of
message-queue answers (malformed envelopes and bodies, wrong types, unknown message types, huge
batches, duplicate and reordered job messages), the Actions emulator serves each as the answer
to the listener's next GET of its message queue, and a running listener takes them in order.

Hostile shapes are among them: bodies and envelopes nested 100,000 deep (a RecursionError in
`json.loads`), `NaN`, integers of thousands of digits, lone surrogates, and an answer over the
client's size cap (docs/security.md, "Bad input").

Whatever it is served, the listener keeps running and writes `Running` only on a runner named by
a JobStarted it was sent, never on a terminal runner or one being deleted; afterwards it still
scales for a real job. The examples are drawn before the listener starts (derandomized, a fixed
number), so the run is the same every time."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sandbox.kube.store import Event
from shared.actions.transport import MAX_RESPONSE_BYTES
from tests.listener.conftest import (
    Cluster,
    GitHub,
    StartListener,
    eventually,
)
from tests.listener.test_e2e_faults import scaled_to

EXAMPLES = 25
RUNNERS_KEY = ("actions.github.com", "ephemeralrunners")
# (name, phase, being deleted): the runners the messages may name.
RUNNERS = [
    ("runner-pending", "Pending", False),
    ("runner-failed", "Failed", False),
    ("runner-succeeded", "Succeeded", False),
    ("runner-deleting", "Pending", True),
]
# Never named by any message: nothing may promote it.
IDLE = ("runner-idle", "Pending", False)
TERMINAL = {"Failed", "Succeeded"}
TYPE = "RunnerScaleSetJobMessages"

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
runner_names = st.sampled_from([name for name, _, _ in RUNNERS] + ["no-such-runner"]) | st.text(
    max_size=80
)
job_message = st.fixed_dictionaries(
    {
        "messageType": st.sampled_from(
            ["JobAvailable", "JobAssigned", "JobStarted", "JobCompleted", "JobUnknown", ""]
        )
        | scalars,
    },
    optional={
        "runnerRequestId": st.integers(min_value=-5, max_value=2**63) | scalars,
        "runnerName": runner_names | scalars,
        "runnerId": st.integers(min_value=-5, max_value=2**31) | scalars,
        "jobId": st.text(max_size=20) | scalars,
        "ownerName": st.text(max_size=20) | scalars,
        "repositoryName": st.text(max_size=20) | scalars,
        "jobWorkflowRef": st.text(max_size=40) | scalars,
        "jobDisplayName": st.text(max_size=40) | scalars,
        "workflowRunId": st.integers() | scalars,
        "eventName": st.text(max_size=20) | scalars,
        "requestLabels": st.lists(st.text(max_size=10), max_size=3) | scalars,
        "queueTime": st.sampled_from(["2026-12-02T10:00:00Z", "yesterday"]) | scalars,
        "result": st.sampled_from(["succeeded", "failed", "canceled"]) | scalars,
    },
)
batches = (
    st.lists(job_message | scalars | st.lists(scalars, max_size=3), max_size=8)
    # Huge, and every element repeated: duplicates of one JobStarted among them.
    | st.lists(job_message, min_size=1, max_size=4).map(lambda jobs: jobs * 100)
    # Reordered: a runner's JobCompleted before its JobStarted.
    | st.lists(job_message, min_size=2, max_size=6).map(lambda jobs: jobs[::-1])
)
statistics = scalars | st.fixed_dictionaries(
    {},
    optional={
        key: st.integers(min_value=-5, max_value=2**63) | scalars
        for key in (
            "totalAvailableJobs",
            "totalAcquiredJobs",
            "totalAssignedJobs",
            "totalRunningJobs",
            "totalRegisteredRunners",
            "totalBusyRunners",
            "totalIdleRunners",
        )
    },
)
DEEP = 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# Arrays and objects nested deeper than any parser's stack, and over the decoder's depth cap.
deep = st.sampled_from([201, DEEP]).map(nested)
envelope = st.fixed_dictionaries(
    {
        "messageId": st.integers(min_value=-5, max_value=2**63) | scalars,
        "messageType": st.sampled_from([TYPE, "SomethingElse"]) | scalars,
        "body": batches.map(json.dumps) | st.text(max_size=40) | scalars | deep,
    },
    optional={"statistics": statistics},
)
answers = (
    envelope.map(json.dumps)
    | st.text(max_size=60)
    | st.lists(envelope, max_size=2).map(json.dumps)
    | deep
)


def message(message_id: int, jobs: list[dict[str, Any]]) -> str:
    body = json.dumps(jobs)
    return json.dumps({"messageId": message_id, "messageType": TYPE, "body": body})


def started(name: str, request_id: int) -> dict[str, Any]:
    return {"messageType": "JobStarted", "runnerRequestId": request_id, "runnerName": name}


def raw_message(message_id: int, body: str) -> str:
    return json.dumps({"messageId": message_id, "messageType": TYPE, "body": body})


HUGE_NUMBER = "1" + "0" * 5_000
# Served on top of the drawn examples, whatever hypothesis draws: each shape once.
HOSTILE = [
    # A body nested 100,000 deep: json.loads raised RecursionError and the listener exited.
    [raw_message(10**6 + 3, nested(DEEP))],
    [raw_message(10**6 + 9, '{"a":' * DEEP + "1" + "}" * DEEP)],
    # The same in the envelope, and one job message of a valid batch nested deep.
    [nested(DEEP)],
    [
        raw_message(
            10**6 + 4, json.dumps([started("runner-pending", 11)])[:-1] + "," + nested(DEEP) + "]"
        )
    ],
    # Not JSON: NaN and Infinity, a lone surrogate, a number of 5,000 digits.
    [raw_message(10**6 + 5, '[{"messageType": "JobStarted", "runnerRequestId": NaN}]')],
    [raw_message(10**6 + 6, '[{"messageType": "JobStarted", "runnerName": "\\ud800"}]')],
    [
        raw_message(
            10**6 + 7, '[{"messageType": "JobStarted", "runnerRequestId": ' + HUGE_NUMBER + "}]"
        )
    ],
    [f'{{"messageId": {HUGE_NUMBER}, "messageType": "{TYPE}", "body": "[]"}}'],
    # Over the client's cap: refused before it is read, then the next poll goes on.
    [
        raw_message(
            10**6 + 8,
            json.dumps([{"messageType": "JobAvailable", "pad": "x" * MAX_RESPONSE_BYTES}]),
        )
    ],
]


# Explicit examples on top of the drawn ones, so every run reaches the guarded JobStarted path:
# each runner of the pool started, in one batch, duplicated, and after its JobCompleted.
EXPLICIT = [
    [message(10**6, [started(name, i) for i, (name, _, _) in enumerate(RUNNERS)])],
    [message(10**6 + 1, [started("runner-failed", 7)] * 50)] * 2,
    [
        message(
            10**6 + 2,
            [
                {
                    "messageType": "JobCompleted",
                    "runnerRequestId": 8,
                    "result": "succeeded",
                    "runnerName": "runner-succeeded",
                },
                started("runner-succeeded", 8),
                started("runner-deleting", 9),
            ],
        )
    ],
]


def draw_examples() -> list[list[str]]:
    drawn: list[list[str]] = []

    def collect(sequence: list[str]) -> None:
        drawn.append(sequence)

    for sequence in EXPLICIT:
        collect = example(sequence)(collect)
    search = settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )(given(st.lists(answers, min_size=1, max_size=3))(collect))
    search()
    return drawn


def started_names(answer: str) -> set[str]:
    """Every runnerName a JobStarted in this answer names, however malformed the rest."""
    names: set[str] = set()
    try:
        outer: Any = json.loads(answer)
    except (ValueError, RecursionError):
        return names
    for message in outer if isinstance(outer, list) else [outer]:
        body = message.get("body") if isinstance(message, dict) else None
        try:
            jobs: Any = json.loads(body) if isinstance(body, str) else None
        except (ValueError, RecursionError):
            continue
        for job in jobs if isinstance(jobs, list) else []:
            if isinstance(job, dict) and job.get("messageType") == "JobStarted":
                names.add(str(job.get("runnerName")))
    return names


async def record_running(
    cluster: Cluster, promotions: list[tuple[str, str | None, bool, str]]
) -> None:
    """(runner, phase before, being deleted before, writer) for each write that made it Running."""
    subscription = cluster.kube.store.subscribe({RUNNERS_KEY})
    try:
        while True:
            event = await subscription.queue.get()
            if not isinstance(event, Event):
                return
            phase = (event.obj.get("status") or {}).get("phase")
            old = event.old or {}
            before = (old.get("status") or {}).get("phase")
            if phase == "Running" and before != "Running":
                deleting = bool((old.get("metadata") or {}).get("deletionTimestamp"))
                promotions.append((event.obj["metadata"]["name"], before, deleting, event.actor))
    finally:
        cluster.kube.store.unsubscribe(subscription)


async def test_no_message_makes_the_listener_exit_or_write_a_wrong_phase(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    examples = draw_examples()
    assert len(examples) >= EXAMPLES
    drawn_deep = sum("[" * 201 in a or '{"a":' * 201 in a for seq in examples for a in seq)
    assert drawn_deep, "hypothesis draws deep shapes too"
    examples += HOSTILE
    for name, phase, deleting in [*RUNNERS, IDLE]:
        await cluster.create_runner(name, phase=phase, deleting=deleting)
    promotions: list[tuple[str, str | None, bool, str]] = []
    recorder = asyncio.create_task(record_running(cluster, promotions))
    running = await start_listener()
    state = github.emulator.state
    sent: set[str] = set()

    def polling() -> bool:
        return any(s.polls_in_flight for s in state.sessions.values())

    for sequence in examples:
        for answer in sequence:
            sent |= started_names(answer)
            fault = github.emulator.faults.inject("get_message", status=200, body=answer, count=1)

            async def handled(fault: Any = fault) -> bool:
                # Served, and the listener is back in its next long poll (or has exited).
                return fault.hits == 1 and (polling() or running.task.done())

            await eventually(handled, what=f"the listener to take {answer[:80]!r}")
            assert not running.task.done(), f"the listener exited on {answer[:200]!r}"

    github.enqueue(1, duration=60.0)
    await scaled_to(cluster, 1)
    assert not running.task.done()
    recorder.cancel()

    # The examples reach the guarded path: JobStarted for every runner of the pool was sent.
    assert {name for name, _, _ in RUNNERS} <= sent
    assert [p[0] for p in promotions] == ["runner-pending"]
    by_listener = [p for p in promotions if p[3] == cluster.listener_user]
    assert by_listener == promotions, "only the listener writes Running here"
    assert [p for p in by_listener if p[1] in TERMINAL] == []
    assert [p for p in by_listener if p[2]] == []
    assert [p for p in by_listener if p[0] not in sent] == []
    assert (await cluster.runner(IDLE[0])).get("status", {}).get("phase") == "Pending"

    # One line for each hostile body skipped, naming why, never the body itself.
    skipped = [r.getMessage() for r in caplog.records if "no job messages taken" in r.getMessage()]
    assert any(
        f"message {10**6 + 3}'s body is not valid JSON: recursion limit" in line for line in skipped
    )
    assert any(f"message {10**6 + 5}'s body is not valid JSON" in line for line in skipped)
    assert all(len(line) < 300 for line in skipped)
    # The answer over the cap was refused (and polled again), not read.
    assert any(
        "GET message failed" in r.getMessage() and "over the cap of 4.0 MiB" in r.getMessage()
        for r in caplog.records
    )
