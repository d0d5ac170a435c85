"""The runner-namespace reconciler: keeps the controller's RoleBinding in a runner namespace
until nothing there needs it (docs/install.md#deleting-a-runner-namespace)."""

from controller.runnernamespace.reconciler import PROTECTION_FINALIZER, ROLE_NAME, setup

__all__ = ["PROTECTION_FINALIZER", "ROLE_NAME", "setup"]
