"""Jobs enqueued on the Actions emulator -> replicas and patchID on the EphemeralRunnerSet."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from tests.listener.conftest import (
    RUNNER_SET,
    SCALE_SET,
    Cluster,
    GitHub,
    StartListener,
    eventually,
)

UNSET_ID = 999_999
"""A scale set id nobody has: what a user leaves in the set before the listener starts."""


async def set_scale_set_id(cluster: Cluster, scale_set_id: int) -> None:
    patch = {"spec": {"ephemeralRunnerSpec": {"runnerScaleSetId": scale_set_id}}}
    await cluster.objects.patch(EPHEMERAL_RUNNER_SET, cluster.namespace, RUNNER_SET, patch)


async def scale_set_id_in_set(cluster: Cluster) -> int:
    return int((await cluster.runner_set_spec())["ephemeralRunnerSpec"]["runnerScaleSetId"])


async def runner_set_patches(cluster: Cluster) -> int:
    return cluster.kube.requests.count(
        verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user, code=200
    )


@pytest.mark.parametrize(("min_runners", "max_runners"), [(0, 10), (2, 5)])
async def test_idle_listener_publishes_min_with_patch_id_zero(
    cluster: Cluster, start_listener: StartListener, min_runners: int, max_runners: int
) -> None:
    await start_listener(min_runners=min_runners, max_runners=max_runners)

    async def idle_polls_published() -> bool:
        return await runner_set_patches(cluster) >= 3

    await eventually(idle_polls_published, what="three publications (start and empty polls)")
    spec = await cluster.runner_set_spec()
    assert (spec["replicas"], spec["patchID"]) == (min_runners, 0)


@pytest.mark.parametrize(
    ("min_runners", "max_runners", "jobs", "replicas"),
    [(0, 10, 3, 3), (1, 10, 3, 4), (0, 2, 5, 2), (2, 3, 4, 3)],
)
async def test_enqueued_jobs_set_replicas_within_bounds(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    min_runners: int,
    max_runners: int,
    jobs: int,
    replicas: int,
) -> None:
    await start_listener(min_runners=min_runners, max_runners=max_runners)
    github.enqueue(jobs)

    async def scaled() -> bool:
        spec = await cluster.runner_set_spec()
        return bool(spec.get("replicas") == replicas and spec.get("patchID", 0) > 0)

    await eventually(scaled, what=f"replicas={replicas} with a new patch id")


async def test_listener_registers_the_scale_set_by_name(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await github.client.delete_runner_scale_set(github.scale_set_id)
    await set_scale_set_id(cluster, UNSET_ID)
    await start_listener(runner_scale_set_id=0)

    async def registered() -> bool:
        return (
            await github.client.get_runner_scale_set(runner_group_id=1, name=SCALE_SET) is not None
        )

    await eventually(registered, what="the scale set registered by name")
    github.enqueue(2)

    async def scaled() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == 2

    await eventually(scaled, what="replicas=2 through the registered scale set")
    registered_set = await github.client.get_runner_scale_set(runner_group_id=1, name=SCALE_SET)
    assert registered_set is not None
    assert await scale_set_id_in_set(cluster) == registered_set.id


async def test_listener_finds_the_scale_set_by_name(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await set_scale_set_id(cluster, UNSET_ID)
    await start_listener(runner_scale_set_id=0)
    github.enqueue(1)

    async def scaled() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == 1

    await eventually(scaled, what="replicas=1")
    assert github.emulator.state.count("create_scale_set") == 1
    # The runners get the id it found, without anyone copying it from the log.
    assert await scale_set_id_in_set(cluster) == github.scale_set_id
    # The set's manifest applied again brings its own id back; the next publication fixes it.
    await set_scale_set_id(cluster, UNSET_ID)
    github.enqueue(1)

    async def corrected() -> bool:
        return await scale_set_id_in_set(cluster) == github.scale_set_id

    await eventually(corrected, what="the scale set id written again")


async def test_configured_scale_set_id_leaves_the_set_spec_alone(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """With the id in the config (ARC's listener), the set already carries it from the
    AutoscalingRunnerSet: the listener patches replicas and patchID only."""
    await set_scale_set_id(cluster, UNSET_ID)
    await start_listener(runner_scale_set_id=github.scale_set_id)
    github.enqueue(1)

    async def scaled() -> bool:
        return (await cluster.runner_set_spec()).get("replicas") == 1

    await eventually(scaled, what="replicas=1")
    assert await scale_set_id_in_set(cluster) == UNSET_ID


async def test_probes_and_arc_metrics_are_served(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    running = await start_listener(min_runners=1, max_runners=4)
    port = await running.port
    github.enqueue(2)
    async with aiohttp.ClientSession(
        base_url=f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(total=5)
    ) as http:

        async def ready_and_scaled() -> bool:
            async with http.get("/readyz") as response:
                if response.status != 200:
                    return False
            return (await cluster.runner_set_spec()).get("replicas") == 3

        await eventually(ready_and_scaled, what="/readyz 200 and replicas=3")
        async with http.get("/healthz") as response:
            assert response.status == 200
        async with http.get("/metrics") as response:
            text = await response.text()
    values = {
        sample.name: (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    labels = {
        "name": "my-runners",
        "namespace": cluster.namespace,
        "enterprise": "",
        "organization": "example-org",
        "repository": "",
    }
    assert values["gha_min_runners"] == (labels, 1.0)
    assert values["gha_max_runners"] == (labels, 4.0)
    assert values["gha_assigned_jobs"] == (labels, 2.0)
    assert values["gha_desired_runners"] == (labels, 3.0)


async def test_listener_registers_the_scale_set_in_its_runner_group(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await github.client.delete_runner_scale_set(github.scale_set_id)
    group_id = github.emulator.add_runner_group("team-a")
    await start_listener(runner_scale_set_id=0, runner_group="team-a")

    async def registered() -> bool:
        found = await github.client.get_runner_scale_set(runner_group_id=group_id, name=SCALE_SET)
        return found is not None

    await eventually(registered, what="the scale set registered in runner group team-a")


async def test_readiness_follows_poll_progress(
    github: GitHub, start_listener: StartListener
) -> None:
    running = await start_listener(long_poll_timeout_seconds=1)
    port = await running.port
    async with aiohttp.ClientSession(
        base_url=f"http://127.0.0.1:{port}", timeout=aiohttp.ClientTimeout(total=5)
    ) as http:

        async def ready_is(status: int) -> bool:
            async with http.get("/readyz") as response:
                return response.status == status

        await eventually(lambda: ready_is(200), what="ready")
        outage = github.emulator.faults.inject("get_message", status=503)
        await eventually(lambda: ready_is(503), what="not ready during the outage")
        github.emulator.faults.remove(outage)
        await eventually(lambda: ready_is(200), what="ready again")
        async with http.get("/healthz") as response:
            assert response.status == 200
    assert not running.task.done()
