"""The sandbox as a tool: `gha-sandbox demo` (a workload through the whole system, with live
progress, invariants, a report and a plot), `gha-sandbox up` (the system left running) and
`gha-sandbox job add`. Documented in docs/sandbox.md."""

from __future__ import annotations

from sandbox.demo.cli import main

__all__ = ["main"]
