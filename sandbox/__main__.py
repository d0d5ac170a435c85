"""`gha-sandbox`: the embedded emulators of the Kubernetes API server and the Actions service."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox",
        description="Run the Kubernetes API emulator (kube), the GitHub Actions service emulator "
        "(actions), or the whole system on both (demo).",
    )
    parser.add_argument("component", choices=["kube", "actions", "demo"])
    args, _ = parser.parse_known_args(argv)
    print(f"gha-sandbox: {args.component} is not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
