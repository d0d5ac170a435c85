"""`gha-controller`: argv in, exit code out (flags: controller/settings.py; wiring:
controller/app.py)."""

from __future__ import annotations

import sys

from controller.app import main

if __name__ == "__main__":
    sys.exit(main())
