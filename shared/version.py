"""The version of this distribution, as installed (what both processes report as theirs).

Read from the `Version:` line of the distribution's METADATA in its `.dist-info` folder on
`sys.path`, where `importlib.metadata` finds it too (tests/shared/test_version.py compares the
two), without importing that module: with the `email`, `zipfile` and `csv` modules it needs, it
is 0.8 MB of the listener's 40 MB (docs/listener.md#memory).
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache

DISTRIBUTION = "gha-runner-scaler"
# A dist-info folder's name: the distribution's name normalized (PEP 503, "-" as "_"), a dash,
# the version.
_FOLDER = re.compile(r"(?P<name>[^-]+)-(?P<version>[^-]+)\.dist-info")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@cache
def package_version() -> str:
    """The installed version of gha-runner-scaler, or "unknown" when run from a bare tree."""
    wanted = _normalized(DISTRIBUTION)
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            found = _FOLDER.fullmatch(name)
            if found is None or _normalized(found["name"]) != wanted:
                continue
            try:
                with open(os.path.join(entry, name, "METADATA"), encoding="utf-8") as metadata:
                    for line in metadata:
                        if line.startswith("Version:"):
                            return line.removeprefix("Version:").strip()
                        if not line.strip():
                            break
            except OSError:
                pass
    return "unknown"
