"""What the EphemeralRunner and EphemeralRunnerSet reconcilers share: the Actions client pool,
the proxy and CA resolution of a runner spec, their settings and policies, the building blocks of
runner objects, and the dependencies the composition root hands both."""
