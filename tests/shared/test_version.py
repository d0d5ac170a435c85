"""The version both processes report is the installed distribution's, read without importing
`importlib.metadata` (0.8 MB of the listener's memory: docs/listener.md#memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from shared.version import DISTRIBUTION, package_version


def test_the_version_is_the_one_importlib_metadata_reads() -> None:
    assert package_version() == metadata.version(DISTRIBUTION)


def test_reading_it_imports_no_importlib_metadata() -> None:
    code = (
        "import json, sys\n"
        "from shared.version import package_version\n"
        "print(json.dumps([package_version(), 'importlib.metadata' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == [metadata.version(DISTRIBUTION), False]
