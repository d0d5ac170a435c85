"""The listener process does not import what it does not use: kubernetes-asyncio, whose package
brings every API model (about 40 MB), PyJWT and cryptography, which only a GitHub App needs
(about 9 MB), and the OTLP exporter, which only exporting traces needs (about 4 MB)
(docs/listener.md#memory). Counted in a fresh interpreter, so a regression shows without
measuring memory."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("kubernetes_asyncio", "jwt", "cryptography", "opentelemetry.exporter.otlp")


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
    assert [name for name in loaded if name.startswith(HEAVY)] == []
