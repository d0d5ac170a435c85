"""`gha-sandbox`: the embedded emulators of the Kubernetes API server and the Actions service."""

from __future__ import annotations

import argparse
import importlib
import sys

COMPONENTS = {
    "kube": ("sandbox.kube.__main__", "the Kubernetes API server emulator"),
    "actions": ("sandbox.actions.__main__", "the GitHub Actions service emulator"),
    "demo": ("sandbox.demo", "a workload through the whole system, with a summary"),
    "up": ("sandbox.demo.up", "the whole system left running, to explore with kubectl"),
    "job": ("sandbox.demo.jobs", "queue jobs on a sandbox that `up` started"),
    "node": (
        "sandbox.demo.nodes",
        "list, cordon, uncordon or drain the nodes of a sandbox that `up` started",
    ),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="gha-sandbox",
        description="Run one part of the embedded sandbox; `gha-sandbox COMPONENT --help` tells "
        "its options.",
        epilog="components: " + "; ".join(f"{k}: {v[1]}" for k, v in COMPONENTS.items()),
    )
    parser.add_argument("component", choices=sorted(COMPONENTS))
    parser.add_argument("options", nargs=argparse.REMAINDER)
    parsed = parser.parse_args(args[:1] if args and not args[0].startswith("-") else args)
    module = importlib.import_module(COMPONENTS[parsed.component][0])
    code: int = module.main(args[1:])
    return code


if __name__ == "__main__":
    sys.exit(main())
