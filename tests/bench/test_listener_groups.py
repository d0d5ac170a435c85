"""bench/listener_groups.py at a CI size, so the benchmark cannot rot: listeners alone make a
pod each, listeners of one group one pod, with fewer controller writes."""

from __future__ import annotations

from bench.listener_groups import controller_side

SETS = 4


async def test_grouped_listeners_make_one_pod_and_fewer_writes() -> None:
    alone = await controller_side(SETS, grouped=False)
    grouped = await controller_side(SETS, grouped=True)
    assert (alone.pods, grouped.pods) == (SETS, 1)
    assert grouped.writes < alone.writes
