"""Every call of the controller to the Actions service (docs/architecture.md, "controller/github/:
the one way to the Actions service").

`clients.py` keeps the pool of Actions clients, one per GitHub configuration, with credentials
from the config Secret; `network.py` resolves a spec's proxy and CA; `runners.py` (`Runners`)
and `scalesets.py` (`ScaleSets`) are what the reconcilers call. No reconciler imports the
Actions client: an import-linter contract in pyproject.toml holds them to it."""
