"""Processes that die with the sandbox, whatever kills it (docs/sandbox.md#processes).

`python -m sandbox.leash PARENT_PID PROGRAM [ARGS...]` asks Linux to SIGKILL this process when
the thread that started it ends (`prctl(PR_SET_PDEATHSIG)`), checks that its parent is still
PARENT_PID (it may have died before the request), then replaces itself with PROGRAM: the same
pid, the request kept across `execv`. So a controller or listener the kubelet or the demo starts
cannot outlive an emulator killed with SIGKILL, crashed or OOM-killed, holding its ports; a
normal stop still sends SIGTERM first. Elsewhere than Linux the program runs unleashed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1


def command(program: str, *args: str) -> list[str]:
    """The argv that runs `program` leashed to this process."""
    return [sys.executable, "-m", "sandbox.leash", str(os.getpid()), program, *args]


def main(argv: Sequence[str]) -> int:
    parent, program, *args = argv
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            print(f"sandbox.leash: prctl failed: errno {ctypes.get_errno()}", file=sys.stderr)
            return 1
        if os.getppid() != int(parent):
            return 1  # the sandbox is already gone
    os.execv(program, [program, *args])
    return 1  # not reached: execv replaces the process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
