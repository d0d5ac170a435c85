"""The AutoscalingListener reconciler: a listener's pod, its ServiceAccount, Role, RoleBinding
and config Secret."""

from controller.autoscalinglistener.reconciler import setup

__all__ = ["setup"]
