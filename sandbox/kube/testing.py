"""Pytest plugin: `kube` (a running KubeEmulator with the project's CRDs) and `kube_api`.

Enable with `pytest_plugins = ["sandbox.kube.testing"]`. The CRDs are read from
`manifests/crds/*.yaml` at the project root when that directory exists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import PROJECT_ROOT, KubeEmulator, project_crds

__all__ = ["PROJECT_ROOT", "kube", "kube_api", "project_crds"]


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
