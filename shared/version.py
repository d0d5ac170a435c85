"""The version of this distribution, as installed (what both processes report as theirs)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "gha-runner-scaler"


@cache
def package_version() -> str:
    """The installed version of gha-runner-scaler, or "unknown" when run from a bare tree."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
