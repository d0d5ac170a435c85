"""The EphemeralRunnerSet reconciler: `setup(manager, deps)` adds it to a manager."""

from controller.ephemeralrunnerset.reconciler import setup

__all__ = ["setup"]
