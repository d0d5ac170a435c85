"""Fixtures shared by every test package: a random namespace name per test, that namespace
created on the Kubernetes emulator, and the object client on it."""

from __future__ import annotations

import uuid

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from shared.kube.objects import Objects

pytest_plugins = ["sandbox.actions.testing", "sandbox.kube.testing"]


@pytest.fixture
def namespace() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ns(kube: KubeEmulator, namespace: str) -> str:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return namespace


@pytest.fixture
def objects(kube_api: client.ApiClient) -> Objects:
    return Objects(kube_api, timeout=5.0)
