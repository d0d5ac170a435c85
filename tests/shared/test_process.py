"""A SIGTERM that reaches `gha-controller` or `gha-listener` while it still imports ends it with
exit 0, not death by the signal (shared/process.py). The signal is sent from an import hook at
the moment the process imports its composition root, the longest part of its start."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

STARTS = {
    "gha-controller": ("controller.__main__", "controller.app"),
    "gha-listener": ("listener.__main__", "listener.app"),
}


def _start_terminated_while_importing(entry: str, heavy: str, *, argv: list[str]) -> int:
    script = textwrap.dedent(
        f"""
        import os, signal, sys, time

        class TerminateOnImport:
            def find_spec(self, name, path, target=None):
                if name == {heavy!r}:
                    os.kill(os.getpid(), signal.SIGTERM)
                    time.sleep(30)
                return None

        sys.meta_path.insert(0, TerminateOnImport())
        sys.argv = {argv!r}
        from {entry} import main
        sys.exit(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    return done.returncode


@pytest.mark.parametrize("command", sorted(STARTS))
def test_sigterm_while_importing_is_a_clean_stop(command: str) -> None:
    entry, heavy = STARTS[command]
    assert _start_terminated_while_importing(entry, heavy, argv=[command]) == 0


def test_a_migration_stopped_by_sigterm_is_not_a_success() -> None:
    """Once running, `gha-controller migrate-from-arc` dies of SIGTERM as by default."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        from controller import app, migrate

        def stopped(argv):
            os.kill(os.getpid(), signal.SIGTERM)
            return 0

        migrate.main = stopped
        from controller.__main__ import main
        sys.argv = ["gha-controller", "migrate-from-arc"]
        sys.exit(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGTERM
