"""`gha-controller`: the controller manager."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gha-controller",
        description="Reconcile AutoscalingRunnerSets, listeners, EphemeralRunnerSets and "
        "EphemeralRunners.",
    )
    parser.parse_args(argv)
    print("gha-controller: the reconcilers are not built yet (issues 6, 7)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
