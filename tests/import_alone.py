"""Imports each named module of ours alone, in a child forked from a clean parent.

Run as a script by tests/test_imports.py: `python tests/import_alone.py MODULE...`. The parent
first imports every third-party and standard-library module that our sources import (found by
parsing them), and none of ours; each child then imports one module of ours and exits. So a
module still imports only what its own import statements bring in, as in a fresh interpreter,
without paying each interpreter's start and the heavy libraries' imports once per module (that
was seven minutes of the suite). Prints one line per module that failed; exits 1 if any did.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("listener", "controller", "shared", "sandbox")


def _external_imports() -> set[str]:
    names: set[str] = set()
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module)
    return {name for name in names if name.split(".")[0] not in OURS}


def _preload() -> None:
    for name in sorted(_external_imports()):
        try:
            importlib.import_module(name)
        except Exception:  # optional or platform-only modules: the child will tell
            continue
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in OURS)
    if leaked:
        raise SystemExit(f"the parent imported modules of ours: {leaked}")


def _import_in_child(module: str) -> str | None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            importlib.import_module(module)
        except BaseException as exc:  # any failure is the finding
            os.write(write_end, f"{module}: {type(exc).__name__}: {exc}".encode())
            code = 1
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return message or f"{module}: the child exited with status {status}"


def main(modules: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    _preload()
    failures = [f for f in map(_import_in_child, modules) if f]
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
