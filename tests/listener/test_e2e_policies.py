"""The `scaling_policy` key through the Actions and Kubernetes emulators: each policy changes
what the listener publishes on the EphemeralRunnerSet (docs/policies.md)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.listener.conftest import (
    Cluster,
    GitHub,
    Process,
    StartListener,
    eventually,
    listener_config,
)

ALWAYS_OPEN = {"cron": "* * * * *", "duration": "1h", "timeZone": "Europe/Berlin"}
"""A window opening every minute for an hour: open whenever the test runs."""


async def published(cluster: Cluster, replicas: int, *, settled: bool | None = None) -> None:
    """Wait until the set shows `replicas`; settled: with patch id 0 (True) or not (False)."""

    async def shown() -> bool:
        spec = await cluster.runner_set_spec()
        if spec.get("replicas") != replicas:
            return False
        return settled is None or (spec.get("patchID") == 0) is settled

    await eventually(shown, what=f"replicas={replicas} settled={settled}")


async def publications(cluster: Cluster) -> int:
    return cluster.kube.requests.count(
        verb="patch", resource="ephemeralrunnersets", user=cluster.listener_user, code=200
    )


async def after_more_publications(cluster: Cluster, count: int) -> dict[str, Any]:
    """The set's spec once the listener published `count` more times (empty polls included)."""
    target = await publications(cluster) + count

    async def done() -> bool:
        return await publications(cluster) >= target

    await eventually(done, what=f"{count} more publications")
    return await cluster.runner_set_spec()


async def test_min_idle_keeps_idle_runners_on_top_of_the_busy_ones(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """ARC's formula would ask for minRunners + 3 = 6; minIdle makes minRunners a floor."""
    await start_listener(min_runners=3, max_runners=10, scaling_policy={"minIdle": 1})
    await published(cluster, 3, settled=True)
    github.enqueue(3)
    await published(cluster, 4, settled=False)


async def test_an_open_schedule_raises_min_runners_and_min_idle(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    policy = {"minIdle": 0, "schedules": [{**ALWAYS_OPEN, "minRunners": 2, "minIdle": 4}]}
    await start_listener(min_runners=0, max_runners=10, scaling_policy=policy)
    await published(cluster, 4, settled=True)
    github.enqueue(3)
    await published(cluster, 7, settled=False)


async def test_a_burst_gets_bounded_headroom(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    policy = {"burst": {"threshold": 0, "extraPercent": 100, "maxExtra": 2}}
    await start_listener(min_runners=0, max_runners=20, scaling_policy=policy)
    await published(cluster, 0, settled=True)
    github.enqueue(6)
    await published(cluster, 8, settled=False)


async def test_the_warm_tail_holds_the_burst_after_its_jobs_are_gone(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    policy = {
        "burst": {"threshold": 0, "extraPercent": 100, "maxExtra": 2},
        "warmTailSeconds": 3600,
    }
    await start_listener(min_runners=0, max_runners=20, scaling_policy=policy)
    await published(cluster, 0, settled=True)
    jobs = github.enqueue(6)
    await published(cluster, 8, settled=False)
    for job in jobs:
        github.emulator.cancel_job(job)
    spec = await after_more_publications(cluster, 3)
    assert (spec["replicas"], spec["patchID"] != 0) == (8, True)


async def test_the_scale_down_delay_holds_a_count_until_a_lower_one_lasted(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    await start_listener(
        min_runners=0, max_runners=20, scaling_policy={"scaleDownDelaySeconds": 3600}
    )
    await published(cluster, 0, settled=True)
    jobs = github.enqueue(5)
    await published(cluster, 5, settled=False)
    for job in jobs:
        github.emulator.cancel_job(job)
    spec = await after_more_publications(cluster, 3)
    assert (spec["replicas"], spec["patchID"] != 0) == (5, True)


async def test_without_a_policy_the_canceled_jobs_settle_at_min_runners(
    cluster: Cluster, github: GitHub, start_listener: StartListener
) -> None:
    """The control of the two tests above: ARC's behaviour, which the holds change."""
    await start_listener(min_runners=0, max_runners=20)
    jobs = github.enqueue(5)
    await published(cluster, 5, settled=False)
    for job in jobs:
        github.emulator.cancel_job(job)
    await published(cluster, 0, settled=True)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            {"schedules": [{**ALWAYS_OPEN, "timeZone": "Europe/Berln", "minIdle": 2}]},
            'scaling_policy.schedules.0.timeZone: unknown time zone "Europe/Berln" (an IANA '
            'name such as "Europe/Berlin" or "UTC")',
        ),
        (
            {"schedules": [{**ALWAYS_OPEN, "cron": "0 8 * *", "minIdle": 2}]},
            'scaling_policy.schedules.0.cron: not a cron expression: "0 8 * *" (five fields: '
            'minute hour day-of-month month day-of-week, e.g. "0 8 * * 1-5", or a macro such as '
            '"@daily")',
        ),
        (
            {"minIdle": 11},
            "scaling_policy.minIdle must not be greater than maxRunners (11 > 10)",
        ),
    ],
    ids=["time-zone", "cron", "min-idle-above-max"],
)
async def test_a_bad_policy_stops_the_listener_with_exit_2_and_one_line(
    cluster: Cluster, github: GitHub, spawn: Any, policy: dict[str, Any], message: str
) -> None:
    config = listener_config(cluster, github, scaling_policy=policy, github_token=github.token)
    process: Process = await spawn(config)
    assert await process.wait() == 2
    assert process.lines == [f"gha-listener: invalid configuration: {message}"]
