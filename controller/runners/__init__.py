"""What the EphemeralRunner and EphemeralRunnerSet reconcilers share: their settings and
policies, the building blocks of runner objects, and the dependencies the composition root hands
both (the Actions calls themselves are in controller/github/)."""
