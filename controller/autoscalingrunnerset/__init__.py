"""The AutoscalingRunnerSet reconciler's home. Its reconciler is not written yet; the projection
of its owned EphemeralRunnerSet watch is, and is tested."""
