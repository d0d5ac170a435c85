"""`gha-controller`: the controller manager (see controller/runtime/process.py for the flags)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from controller.runtime.process import main as run_process
from controller.runtime.registry import REGISTRY

# Modules whose import registers a controller with REGISTRY, in the order they should be set up.
INSTALLED: tuple[str, ...] = ("controller.ephemeralrunnerset", "controller.ephemeralrunner")


def main(argv: Sequence[str] | None = None) -> int:
    for module in INSTALLED:
        importlib.import_module(module)
    return run_process(argv, registry=REGISTRY)


if __name__ == "__main__":
    sys.exit(main())
