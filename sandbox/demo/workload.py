"""What the demo queues: a list of jobs, each with its queued-at offset, duration, result and
labels, in simulated seconds (the demo divides them by the speed-up factor).

Three sources: the built-in default (bursts of jobs with a long-tailed duration spread), a single
burst (`--jobs N`), and a CSV trace (`--trace FILE`, format in docs/sandbox.md#trace-format).
The same seed gives the same workload.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

RESULTS = ("succeeded", "failed")
TRACE_COLUMNS = ("queued_at", "duration", "result", "labels")


class WorkloadError(ValueError):
    """A trace that cannot be replayed; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    queued_at: float
    duration: float
    result: str = "succeeded"
    labels: tuple[str, ...] = ()


def default_workload(seed: int) -> list[JobSpec]:
    """About 300 jobs in four bursts over 12 simulated minutes: in each burst jobs arrive over
    a minute or two (exponential gaps), run for a log-normal duration (median 45 s, a tail of
    several minutes, as CI jobs do) and fail one time in twenty."""
    rng = random.Random(seed)
    jobs: list[JobSpec] = []
    for burst in range(4):
        start = burst * 180.0
        size = rng.randint(60, 90)
        at = start
        for _ in range(size):
            at += rng.expovariate(size / 90.0)
            duration = min(600.0, max(5.0, rng.lognormvariate(3.8, 0.7)))
            result = "failed" if rng.random() < 0.05 else "succeeded"
            jobs.append(JobSpec(round(at, 3), round(duration, 3), result))
    return jobs


def burst(count: int, duration: float) -> list[JobSpec]:
    """`count` jobs queued at once, each running `duration` seconds."""
    return [JobSpec(0.0, duration) for _ in range(count)]


def load_trace(path: Path) -> list[JobSpec]:
    """Jobs from a CSV trace with the header `queued_at,duration,result,labels`; `result` may be
    empty (succeeded) and `labels` holds space-separated runs-on labels (may be empty)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or tuple(reader.fieldnames) != TRACE_COLUMNS:
        raise WorkloadError(f"{path}:1: the header must be {','.join(TRACE_COLUMNS)}")
    jobs = []
    for row in reader:
        where = f"{path}:{reader.line_num}"
        try:
            queued_at, duration = float(row["queued_at"]), float(row["duration"])
        except (TypeError, ValueError) as exc:
            raise WorkloadError(f"{where}: queued_at and duration must be numbers") from exc
        if queued_at < 0 or duration < 0:
            raise WorkloadError(f"{where}: queued_at and duration must not be negative")
        result = (row["result"] or "succeeded").strip()
        if result not in RESULTS:
            raise WorkloadError(f"{where}: result must be one of {', '.join(RESULTS)}")
        jobs.append(JobSpec(queued_at, duration, result, tuple((row["labels"] or "").split())))
    if not jobs:
        raise WorkloadError(f"{path}: the trace has no job")
    return sorted(jobs, key=lambda job: job.queued_at)


def digest(jobs: list[JobSpec]) -> str:
    """A fingerprint of the workload: equal for equal workloads, so a report says whether two
    runs replayed the same jobs."""
    text = json.dumps([asdict(job) for job in jobs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
