"""Helpers of the in-cluster tests whose listener pods run as real processes, several per test
(tests/controller/test_standby_in_cluster.py and the listener groups' in-cluster tests): the
install they share is tests/controller/test_in_cluster.py's."""

from __future__ import annotations

import sys

import pytest
import yaml

from shared.api.names import ANNOTATION_LISTENER_GROUP
from shared.typedefs import JSONDict
from tests.controller.test_in_cluster import RUNNERS, Cluster, example_set
from tests.sandbox.kube.test_kubectl import KUBECTL

PODS_AS_PROCESSES = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="runs pods as processes and finds their pids in /proc",
    ),
]
JOB_SECONDS = 0.5
"""A job of `jobs_run`."""


def ready(pod: JSONDict | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def grouped_set(cluster: Cluster, name: str, **spec: object) -> None:
    """The example AutoscalingRunnerSet named `name`, in the listener group "linux", its spec
    updated with `spec`."""
    doc = yaml.safe_load(example_set(cluster.gh.config_url("my-org")))
    doc["metadata"]["name"] = name
    doc["metadata"].setdefault("annotations", {})[ANNOTATION_LISTENER_GROUP] = "linux"
    doc["spec"].update(spec)
    await cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))


async def jobs_run(cluster: Cluster, *sets: str) -> None:
    """A job of each of `sets` runs and succeeds."""
    jobs = [cluster.gh.enqueue_job(labels=[name], duration=JOB_SECONDS) for name in sets]
    await jobs_succeed(cluster, jobs, what=f"a job of each of {sets} completed")


async def jobs_succeed(cluster: Cluster, jobs: list[int], *, what: str) -> None:
    """Every one of `jobs` (their runner request ids) completes, and succeeds."""

    async def done() -> bool:
        return all(cluster.gh.state.jobs[job].state == "completed" for job in jobs)

    await cluster.until(done, what=what)
    assert [cluster.gh.state.jobs[job].result for job in jobs] == ["succeeded"] * len(jobs)


async def can_i(cluster: Cluster, verb: str, resource: str, user: str) -> str:
    """`kubectl auth can-i`'s answer in the runner namespace (it exits 1 when the answer is
    no)."""
    try:
        answer = await cluster.kubectl("auth", "can-i", verb, resource, "-n", RUNNERS, "--as", user)
    except AssertionError:
        return "no"
    return answer.strip()
