"""`gha-listener`: one listener process per runner scale set.

Only the command line lives here; `listener.app` builds and runs the process and documents its
exit codes.
"""

from __future__ import annotations

import argparse
import sys

from listener import app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gha-listener",
        description="Listen for GitHub Actions job messages for one runner scale set and scale "
        "its EphemeralRunnerSet. Configured by ARC's listener config file (LISTENER_CONFIG_PATH) "
        "and LISTENER_<KEY> environment variables; see docs/listener.md.",
    )
    parser.parse_args(argv)
    return app.run()


if __name__ == "__main__":
    sys.exit(main())
