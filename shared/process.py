"""Both processes' start: until a process installs its own SIGTERM handler, SIGTERM ends it
with exit 0.

Python's default for SIGTERM is to die of the signal (exit 143 in Kubernetes' terms). A pod
deleted while its process still imports, or a `docker stop` right after `docker run`, would then
report a failure for a process that had nothing to drain. Each process installs its own handler
before it opens anything that needs closing (the controller before its lease and informers, the
listener before its sessions), and that handler replaces this one.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def exit_on_sigterm_while_starting() -> None:
    """Make SIGTERM end the process with exit 0 from now until its own handler is installed."""
    signal.signal(signal.SIGTERM, _exit)


def _exit(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)
