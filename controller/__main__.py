"""`gha-controller`: argv in, exit code out (flags: controller/settings.py; wiring:
controller/app.py)."""

from __future__ import annotations

import sys

from shared.process import exit_on_sigterm_while_starting


def main() -> int:
    exit_on_sigterm_while_starting()
    # Imported after: a SIGTERM during these imports (a second or more) is a clean stop.
    from controller import app

    return app.main()


if __name__ == "__main__":
    sys.exit(main())
