"""Fixtures of the manifests' tests: what `kubectl kustomize` renders, as `kubectl apply -k`
would send it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[2]
MANIFESTS = ROOT / "manifests"


def kustomize(path: Path) -> list[dict[str, Any]]:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


@pytest.fixture(scope="module")
def install() -> list[dict[str, Any]]:
    return kustomize(MANIFESTS)


@pytest.fixture(scope="module")
def docker_run() -> list[dict[str, Any]]:
    return kustomize(MANIFESTS / "examples" / "docker-run")
