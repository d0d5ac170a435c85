"""Fixtures shared by every test package: a random namespace name per test."""

from __future__ import annotations

import uuid

import pytest

pytest_plugins = ["sandbox.actions.testing", "sandbox.kube.testing"]


@pytest.fixture
def namespace() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"
