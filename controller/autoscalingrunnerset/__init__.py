"""The AutoscalingRunnerSet reconciler: the scale set on GitHub, its EphemeralRunnerSet and its
listener."""

from controller.autoscalingrunnerset.reconciler import setup

__all__ = ["setup"]
