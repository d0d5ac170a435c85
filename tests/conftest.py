"""Fixtures shared by every test package: a random namespace name per test, that namespace
created on the Kubernetes emulator, and the object client on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from shared import wire
from shared.kube.objects import Objects

pytest_plugins = ["sandbox.actions.testing", "sandbox.kube.testing"]

ROOT = Path(__file__).resolve().parents[1]

# Test files whose processes run on simulated time (Leases at the demo's speed-up) or whose
# counts depend on timing windows: `scripts/test` runs them one at a time in a process of their
# own, beside the rest's workers, which it runs at a lower CPU priority (`nice`), so that no
# other test's load starves them (run as one more worker at the same priority, their controllers
# lost their Leases and their counts took an extra status write). A test of theirs marked
# `anywhere` (a usage error refused at start, a rendering) runs with the rest.
SERIAL = (
    "tests/bench/",
    "tests/sandbox/chaos/",
    "tests/sandbox/demo/",
    "tests/controller/test_burst.py",
    "tests/controller/test_counting.py",
    "tests/controller/test_lifecycle_in_cluster.py",
    "tests/controller/test_standby_in_cluster.py",
    "tests/listener/test_e2e_standby.py",
)


# The longest files of the parallel run, longest first. pytest-xdist hands each worker whole files
# in collection order, where these came last (test_imports.py alone is 86 s of CPU): one worker
# then ran them while the other sat idle. Handed out first, they run beside the many short files.
LONGEST_FIRST = (
    "tests/test_imports.py",
    "tests/security/test_rbac.py",
    "tests/controller/test_back_to_arc.py",
    "tests/controller/test_in_cluster.py",
    "tests/listener/test_e2e_fuzz.py",
)


@pytest.fixture(autouse=True)
def json_parser() -> Iterator[None]:
    """Each test starts with the JSON parser every process but the controller keeps
    (shared/wire.py), whatever composition root an earlier test of the process ran."""
    previous = wire.use_parser(wire.parse_with_json)
    yield
    wire.use_parser(previous)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        serial = item.path.relative_to(ROOT).as_posix().startswith(SERIAL)
        if serial and item.get_closest_marker("anywhere") is None:
            item.add_marker(pytest.mark.serial)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.relative_to(ROOT).as_posix(), len(rank)))


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
