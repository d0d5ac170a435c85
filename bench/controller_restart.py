"""The controller's memory after a restart against the same process's in steady operation.

Both emulators and the real `gha-controller` process as `bench.controller_scale` runs them
(`--controller-process`). The EphemeralRunnerSet is scaled to N runners: the first controller
process builds its cache one watch event at a time, as in steady operation. It is stopped
(SIGTERM) and a second one started against the same cluster: it lists the N runners and their
pods at start, in pages, and its controllers pass over each runner once. Reported: each
process's RSS once settled and its peak (VmHWM), and their ratio.

    .venv/bin/python -m bench.controller_restart --runners N
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kubernetes_asyncio import client

from bench.controller_scale import NAMESPACE, SCALE_SET, SCALER_USER, Bench, _scale_up, _subprocess
from sandbox.actions.emulator import ActionsEmulator
from sandbox.demo.cluster import setup_cluster
from sandbox.kube.emulator import KubeEmulator


@dataclass(frozen=True, slots=True)
class Memory:
    idle_kib: int
    """RSS once settled before any runner (the first process) or after the list (the second)."""
    settled_kib: int
    """RSS with the N runners, once settled."""
    peak_kib: int
    """VmHWM at that point."""


async def run(*, runners: int, within: float = 900.0) -> tuple[Memory, Memory]:
    """(the process that scaled up, the one started after it) against one cluster."""
    async with (
        ActionsEmulator(require_acquire=False) as gh,
        KubeEmulator(container_runtime=gh.runtime) as kube,
    ):
        pat = gh.add_pat()
        scale_set = gh.state.create_scale_set(
            name=SCALE_SET, runner_group_id=1, labels=[], runner_setting={}
        )
        setup_cluster(
            kube,
            config_url=gh.config_url(),
            pat=pat,
            scale_set_id=scale_set.id,
            namespace=NAMESPACE,
            name=SCALE_SET,
        )
        scaler_token = kube.user_token(SCALER_USER, ["system:masters"])
        with tempfile.TemporaryDirectory() as tmp:
            async with (
                client.ApiClient(await kube.configuration(token=scaler_token)) as scaler,
                _subprocess(kube, Path(tmp)) as first,
            ):
                bench = Bench(kube=kube, gh=gh, controller=first)
                await bench.settle(within=within)
                idle = first.memory_kib()
                await _scale_up(bench, scaler, runners=runners, sets=[SCALE_SET], within=within)
                steady = first.memory_kib()
            assert idle is not None
            assert steady is not None
            async with _subprocess(kube, Path(tmp)) as second:
                bench = Bench(kube=kube, gh=gh, controller=second)
                await bench.settle(within=within)
                restarted = second.memory_kib()
            assert restarted is not None
    return Memory(idle[0], *steady), Memory(0, *restarted)


def report(runners: int, steady: Memory, restarted: Memory) -> str:
    # MB and KB as bench.controller_scale shows them: MiB, and a thousandth of that.
    per_runner = (steady.settled_kib - steady.idle_kib) / 1024 * 1000 / runners
    return "\n".join(
        [
            f"runners: {runners}",
            f"first process: RSS {steady.idle_kib / 1024:.1f} MB with no runner, "
            f"{steady.settled_kib / 1024:.1f} MB with {runners} (steady, "
            f"{per_runner:.1f} KB per runner), peak {steady.peak_kib / 1024:.1f} MB",
            f"after a restart: RSS {restarted.settled_kib / 1024:.1f} MB, "
            f"peak {restarted.peak_kib / 1024:.1f} MB",
            f"restart / steady: RSS {restarted.settled_kib / steady.settled_kib:.2f}, "
            f"peak {restarted.peak_kib / steady.settled_kib:.2f}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runners", type=int, default=10, help="N, the replicas (default 10)")
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, seconds")
    args = parser.parse_args(argv)
    if args.runners < 1:
        parser.error("--runners must be at least 1")
    steady, restarted = asyncio.run(run(runners=args.runners, within=args.timeout))
    print(report(args.runners, steady, restarted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
