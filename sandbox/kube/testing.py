"""Pytest plugin: `kube` (a running KubeEmulator with the project's CRDs) and `kube_api`.

Enable with `pytest_plugins = ["sandbox.kube.testing"]`. The CRDs are read from
`manifests/crds/*.yaml` at the project root when that directory exists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = PROJECT_ROOT / "manifests" / "crds"


def project_crds() -> list[Path]:
    return sorted(CRD_DIR.glob("*.yaml")) if CRD_DIR.is_dir() else []


@pytest.fixture
async def kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator() as emulator:
        emulator.apply_crds(project_crds())
        yield emulator


@pytest.fixture
async def kube_api(kube: KubeEmulator) -> AsyncIterator[client.ApiClient]:
    api = client.ApiClient(await kube.configuration())
    try:
        yield api
    finally:
        await api.close()
