"""`sandbox.leash`: a process started through it dies with the process that started it, even
one killed with SIGKILL (docs/sandbox.md#processes); and the pod directories a killed emulator
left are swept by the next one."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.kube.kubelet.process import ROOT_PREFIX, sweep_stale_roots

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")


def exits_within(pid: int, seconds: float) -> bool:
    """Whether `pid` ends within `seconds`, told by its pidfd (no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], seconds)
        return bool(readable)
    finally:
        os.close(fd)


PARENT = textwrap.dedent(
    """
    import subprocess, sys
    from sandbox import leash
    child = subprocess.Popen(leash.command("/bin/sleep", "600"))
    print(child.pid, flush=True)
    child.wait()
    """
)


@pytest.mark.parametrize("leashed", [True, False])
def test_a_leashed_child_dies_with_its_killed_parent(leashed: bool) -> None:
    """The control case (`leashed=False`, the child started directly) shows what the leash
    buys: without it the child outlives a SIGKILLed parent, as the kubelet's processes did."""
    program = PARENT if leashed else PARENT.replace('leash.command("/bin/sleep", "600")',
                                                    '["/bin/sleep", "600"]')  # fmt: skip
    with subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
    try:
        # Leashed it goes at once; the control case is given a couple of seconds to show it
        # stays.
        assert exits_within(child, 10 if leashed else 2) is leashed
    finally:
        if not leashed:
            os.kill(child, signal.SIGKILL)


def test_pod_directories_of_a_dead_runtime_are_swept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f"{ROOT_PREFIX}{int(gone.stdout)}-abcd"
    alive = tmp_path / f"{ROOT_PREFIX}{os.getpid()}-efgh"
    other = tmp_path / "sandbox-kubelet-notapid"
    for path in (dead, alive, other):
        (path / "pod").mkdir(parents=True)
    assert sweep_stale_roots(tmp_path) == [dead]
    assert not dead.exists()
    assert alive.exists()
    assert other.exists()
