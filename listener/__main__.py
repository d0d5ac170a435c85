"""`gha-listener`: one listener process per runner scale set."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gha-listener",
        description="Listen for GitHub Actions job messages for one runner scale set and scale "
        "its EphemeralRunnerSet. Configured by the file in LISTENER_CONFIG_PATH.",
    )
    parser.parse_args(argv)
    print("gha-listener: the listener loop is not built yet (issue 5)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
