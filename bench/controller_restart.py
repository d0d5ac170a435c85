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

import aiohttp
from kubernetes_asyncio import client, config

from bench.controller_scale import (
    SCALE_SET,
    Bench,
    ControllerHandle,
    controller_subprocess,
    emulators,
    scale_up,
)


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
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        async with (
            aiohttp.ClientSession() as http,
            emulators(workdir, [SCALE_SET]) as (actions, kube_line, gh, kube),
        ):
            kubeconfig = workdir / "controller.kubeconfig"
            scaler_config = client.Configuration()
            await config.load_kube_config(
                config_file=str(workdir / "scaler.kubeconfig"), client_configuration=scaler_config
            )

            def bench(controller: ControllerHandle) -> Bench:
                return Bench(
                    http=http,
                    kube_admin=kube_line["admin"],
                    actions_admin=actions["admin"],
                    controller=controller,
                    children=[gh, kube],
                )

            async with (
                client.ApiClient(scaler_config) as scaler,
                controller_subprocess(kubeconfig, workdir) as first,
            ):
                await bench(first).settle(within=within)
                idle = first.memory_kib()
                await scale_up(
                    bench(first), scaler, runners=runners, sets=[SCALE_SET], within=within
                )
                steady = first.memory_kib()
            assert idle is not None
            assert steady is not None
            async with controller_subprocess(kubeconfig, workdir) as second:
                await bench(second).settle(within=within)
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
