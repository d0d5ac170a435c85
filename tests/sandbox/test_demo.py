"""The README's first command: the whole system on the embedded sandbox, end to end.

`gha-sandbox demo` runs the real `gha-controller` and `gha-listener` processes (the listener
with only its ServiceAccount's RBAC) against both emulators; the jobs must run on runners the
controller created for the listener's count, and the set must scale back to its minimum.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_jobs_and_scales_back(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox",
            "demo",
            "--jobs",
            "3",
            "--duration",
            "1",
            "--max-runners",
            "2",
            "--timeout",
            "150",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    logs = {name: (tmp_path / name).read_text() for name in ("controller.log", "listener.log")}
    context = done.stdout + done.stderr + "".join(f"\n--- {n}\n{t}" for n, t in logs.items())
    assert done.returncode == 0, context
    assert "all 3 jobs completed; scaled back to 0" in done.stdout, context
    assert "listener stopped with exit code 0" in done.stdout, context
    # max-runners bounds the count the listener publishes.
    assert "replicas=3" not in done.stdout, context
    for log in logs.values():
        assert "Forbidden" not in log, context
