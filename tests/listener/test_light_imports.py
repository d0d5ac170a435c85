"""The listener process does not import kubernetes-asyncio, whose package brings every API model
(about 40 MB: BENCHMARKS.md, "listener memory"). Counted in a fresh interpreter, so a regression
shows without measuring memory."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("kubernetes_asyncio",)


def modules_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


def test_importing_the_listener_loads_no_kubernetes_client_library() -> None:
    loaded = modules_after("import listener.__main__, listener.app")
    assert "listener.service" in loaded
    assert [name for name in loaded if name.split(".")[0] in HEAVY] == []
