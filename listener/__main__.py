"""`gha-listener`: one listener process per runner scale set.

Only the command line lives here; `listener.app` builds and runs the process and documents its
exit codes.
"""

from __future__ import annotations

import os
import sys

from shared.process import exit_on_sigterm_while_starting

DISTRIBUTION = "gha-runner-scaler"
PURE_PYTHON = ("FROZENLIST_NO_EXTENSIONS", "AIOHTTP_NO_EXTENSIONS")
"""The switches by which frozenlist and aiohttp use their pure-Python code instead of their C
extensions, read when they are imported. Those cost the listener 1.1 MB (frozenlist's is C++
and maps libstdc++) and 0.6 MB (aiohttp's HTTP parsers) of its 40 MB
(docs/listener.md#memory); it parses a long poll at a time and a few Kubernetes answers, where
their speed does not show."""


def _settings_help() -> str:
    """Every key of the config file with its default and description, from the settings'
    field descriptions in listener/config.py, so they are written in one place."""
    from dataclasses import MISSING, fields

    from listener.config import (
        CONFIG_PATH_VARIABLE,
        ENV_PREFIX,
        SECRET_FILE_KEYS,
        ListenerSettings,
    )
    from shared.actions.wiremodel import SecretStr

    lines = [
        f"Settings (keys of the JSON file {CONFIG_PATH_VARIABLE} names; a {ENV_PREFIX}<KEY> "
        "variable overrides each):"
    ]
    for field in fields(ListenerSettings):
        value = field.default
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        default = "" if field.default_factory is not MISSING else f" (default {value!r})"
        lines.append(f"  {field.name}{default}")
        lines.append(f"      {field.metadata['description']}")
    secrets = ", ".join(f"{ENV_PREFIX}{key.upper()}_FILE" for key in SECRET_FILE_KEYS)
    lines.append(f"{secrets}: read that secret from the file named, not the environment.")
    lines.append("Kubernetes: KUBECONFIG, else the in-cluster identity. See docs/listener.md.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The listener takes no flag but `--help`, `--version` and `--delete-scale-set`, so argparse
    (0.4 MB of the listener's memory, docs/listener.md#memory) is imported only when arguments
    are given."""
    exit_on_sigterm_while_starting()
    _use_pure_python()
    arguments = sys.argv[1:] if argv is None else argv
    delete_scale_set = _parse(arguments) if arguments else False
    # Imported after: a SIGTERM during these imports is a clean stop (shared/process.py).
    from listener import app

    return app.run(delete_scale_set=delete_scale_set)


def _use_pure_python() -> None:
    """Set the PURE_PYTHON switches, unless set already (to "" for the C extensions)."""
    for variable in PURE_PYTHON:
        os.environ.setdefault(variable, "1")


def _parse(arguments: list[str]) -> bool:
    """Print the help or the version and exit 0, or exit 2 naming an unknown argument; whether
    `--delete-scale-set` was given."""
    import argparse
    from importlib import metadata

    parser = argparse.ArgumentParser(
        prog="gha-listener",
        description="Listen for GitHub Actions job messages for one runner scale set and scale "
        "its EphemeralRunnerSet. Configured by ARC's listener config file and environment "
        "variables, not flags.",
        epilog=_settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {metadata.version(DISTRIBUTION)}"
    )
    parser.add_argument(
        "--delete-scale-set",
        action="store_true",
        help="delete the runner scale set this configuration serves from GitHub (by "
        "runner_scale_set_id, else found by name in its runner group) and exit, instead of "
        "listening: the last step of taking a listener down for good",
    )
    return bool(parser.parse_args(arguments).delete_scale_set)


if __name__ == "__main__":
    sys.exit(main())
