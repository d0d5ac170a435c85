"""A listener group with standby (docs/autoscaling.md#standby-for-a-group), measured on the real
`gha-listener`: two processes given the same N config files, each naming its set's own Lease (a
group's two pods), against the emulators, with the controller's default Lease timings (15, 10
and 2 s). The first process starts alone and opens every session; the second starts and stands
by for every set. Measured: each process's RSS, the Lease requests per second of both at rest,
then, the first SIGKILLed, the seconds until every set has a session again, all opened by the
second. Before that, the controller side of `bench.listener_groups` for the N sets grouped, at
one replica and at two: pods, the controller's requests and writes until every pod exists.

    .venv/bin/python -m bench.listener_group_standby --sets 100
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.listener_groups import controller_side
from bench.listener_jobs import NAMESPACE, SET, listener_kubeconfig
from bench.listener_memory import (
    LISTENER_USER,
    apply_sets,
    start_listener,
    status_kib,
    until,
    write_set_configs,
)
from controller.autoscalinglistener.objects import role_rules
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import PersonalAccessToken


@dataclass(frozen=True)
class Sample:
    sets: int
    holder_rss_kib: int
    standby_rss_kib: int
    lease_requests_per_second: float
    takeover_seconds: float


async def measure(count: int, window: float) -> Sample:
    async with (
        KubeEmulator(kubelet=False) as kube,
        ActionsEmulator(long_poll_timeout=1.0) as gh,
    ):
        kube.apply_crds(project_crds())
        names = [f"{SET}-{index:03}" for index in range(count)]
        # The group's Role as the controller makes it: a rule per set and per Lease.
        apply_sets(kube, names, role=lambda doc: doc.update(rules=role_rules(*names, leases=names)))
        for name in names:
            kube.apply(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {},
                }
            )
        token = gh.add_pat()
        client = ActionsClient(config_url=gh.config_url(), credentials=PersonalAccessToken(token))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            sets = await write_set_configs(client, gh.config_url(), folder, names, leases=True)
            kubeconfig = listener_kubeconfig(kube, folder)
            holder = await start_listener(sets, token=token, kubeconfig=kubeconfig)
            standby = None
            try:
                await until(lambda: len(gh.state.sessions) == count)
                first = set(gh.state.sessions)
                standby = await start_listener(sets, token=token, kubeconfig=kubeconfig)
                # Its start: the identity and permission reviews, a first look at each Lease.
                await asyncio.sleep(window)
                before = kube.requests.count(resource="leases", user=LISTENER_USER)
                await asyncio.sleep(window)
                leases = kube.requests.count(resource="leases", user=LISTENER_USER) - before
                holder_rss = status_kib(holder.pid, "VmRSS")
                standby_rss = status_kib(standby.pid, "VmRSS")
                holder.send_signal(signal.SIGKILL)
                killed = time.monotonic()
                await until(
                    lambda: len(gh.state.sessions) == count and not first & set(gh.state.sessions)
                )
                takeover = time.monotonic() - killed
            finally:
                for proc in (holder, standby):
                    if proc is not None and proc.returncode is None:
                        proc.terminate()
                        await proc.wait()
        await client.aclose()
    return Sample(
        sets=count,
        holder_rss_kib=holder_rss,
        standby_rss_kib=standby_rss,
        lease_requests_per_second=leases / window,
        takeover_seconds=takeover,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=100)
    parser.add_argument("--window", type=float, default=20.0, help="seconds at rest measured")
    args = parser.parse_args()
    for replicas in (1, 2):
        side = asyncio.run(controller_side(args.sets, grouped=True, replicas=replicas))
        print(
            f"controller, {args.sets} grouped sets at {replicas} replica(s): {side.pods} pods, "
            f"{side.requests} requests, {side.writes} writes, {side.seconds:.1f} s"
        )
    sample = asyncio.run(measure(args.sets, args.window))
    print(
        f"{sample.sets} sets, 2 processes: holder {sample.holder_rss_kib / 1024:.1f} MB, "
        f"standby {sample.standby_rss_kib / 1024:.1f} MB, "
        f"{sample.lease_requests_per_second:.1f} Lease requests/s at rest, "
        f"every session back {sample.takeover_seconds:.1f} s after SIGKILL"
    )


if __name__ == "__main__":
    main()
