"""Live progress: a view redrawn in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.live import Live
from rich.table import Table

from sandbox.demo.observe import Sample

# Plain lines are for logs and CI: one when something changed, at most this often.
PLAIN_INTERVAL = 1.0


class Progress:
    def __init__(self, console: Console, *, total_jobs: int, max_runners: int) -> None:
        self.console = console
        self.total_jobs = total_jobs
        self.max_runners = max_runners
        self._live: Live | None = None
        self._last_line = ""
        self._last_print = 0.0

    def __enter__(self) -> Self:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    def update(self, sample: Sample, *, elapsed_wall: float) -> None:
        if self._live is not None:
            self._live.update(self._view(sample, elapsed_wall))
            return
        line = self._line(sample)
        now = time.monotonic()
        if line != self._last_line and now - self._last_print >= PLAIN_INTERVAL:
            self.console.print(f"{elapsed_wall:6.1f}s {line}", highlight=False, soft_wrap=True)
            self._last_line, self._last_print = line, now

    def _line(self, s: Sample) -> str:
        phases = " ".join(f"{phase}={n}" for phase, n in s.phases.items()) or "none"
        return (
            f"jobs queued={s.waiting} running={s.running} done={s.done}/{self.total_jobs} "
            f"runners {phases} desired={s.desired}"
        )

    def _view(self, s: Sample, elapsed_wall: float) -> Table:
        table = Table(
            title=f"gha-sandbox: {elapsed_wall:.0f} s ({s.t:.0f} simulated)",
            title_justify="left",
            show_header=False,
        )
        table.add_column(style="bold")
        table.add_column()
        table.add_row(
            "jobs",
            f"queued {s.waiting}   running {s.running}   done {s.done} of {self.total_jobs}",
        )
        phases = "   ".join(f"{phase} {n}" for phase, n in s.phases.items()) or "none"
        table.add_row("runners", f"{phases}   (busy {s.busy}, idle {s.idle})")
        table.add_row("desired replicas", f"{s.desired} (max {self.max_runners})")
        return table
