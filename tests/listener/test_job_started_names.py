"""A JobStarted whose `runnerName` is not a Kubernetes name is logged once and skipped: no
request goes out by it (docs/security.md#names-from-tenants). The message comes from the Actions
emulator as from the service, read by the listener under the listener RBAC of manifests/."""

from __future__ import annotations

import logging

import pytest

from tests.listener.conftest import Cluster, GitHub, StartListener, eventually
from tests.listener.test_e2e_job_started import recorded, start_job_on


@pytest.mark.parametrize(
    "runner_name",
    ["../../team-b/ephemeralrunners/their-runner", "%2e%2e%2Fteam-b", "Runner-A", "runner-a\n"],
)
async def test_a_runner_name_that_is_no_name_is_skipped_without_a_request(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
    runner_name: str,
) -> None:
    caplog.set_level(logging.INFO, logger="listener.service")
    await cluster.create_runner("runner-b", phase="Pending")
    running = await start_listener()
    await start_job_on(github, runner_name)

    def skipped() -> list[logging.LogRecord]:
        return [
            record
            for record in caplog.records
            if record.getMessage().endswith("runner name is not a Kubernetes name, skipped")
        ]

    async def logged() -> bool:
        return bool(skipped())

    await eventually(logged, what="the JobStarted with a bad runner name logged")
    [line] = skipped()
    assert line.levelno == logging.WARNING
    assert "\n" not in line.getMessage()
    runner_reads = cluster.kube.requests.count(
        resource="ephemeralrunners", user=cluster.listener_user
    )
    assert runner_reads == 0
    # The listener goes on: the next JobStarted, for a runner of its set, is written.
    await start_job_on(github, "runner-b")
    assert (await recorded(cluster, "runner-b"))["phase"] == "Running"
    assert not running.task.done()
