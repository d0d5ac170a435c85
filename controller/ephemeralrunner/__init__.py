"""The EphemeralRunner reconciler: `setup(manager, deps)` adds it to a manager."""

from controller.ephemeralrunner.reconciler import setup

__all__ = ["setup"]
