"""What the reconcilers of runners share: the failure and replacement policies and the building
blocks of runner objects (the Actions calls are in controller/github/, the dependencies in
controller/deps.py)."""
