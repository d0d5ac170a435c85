"""Memory of the `gha-listener` process: idle, and after a burst of jobs, with the light
Kubernetes client and with kubernetes-asyncio's, measured in one run.

Both emulators run in this process; the listener is the real `gha-listener` executable (a
subprocess) serving one scale set, authenticated as the listener ServiceAccount. Its memory is
read from /proc/PID/status: VmRSS (now) and VmHWM (the peak). "light" is a token kubeconfig,
which the listener reads itself (shared.kube.http); "client library" is the same identity behind
an exec credential plugin, which only kubernetes-asyncio reads, so the listener imports that
library as it did for every kubeconfig before (docs/listener.md#memory).

Idle: after the session is open and IDLE_POLLS long polls (of 1 s) came back empty. Burst: N
Pending runners each take one of N jobs queued at once; read when every runner is `Running`.

    .venv/bin/python -m bench.listener_memory --jobs 100
    .venv/bin/python -m bench.listener_memory --sets 1,10,100
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.listener_jobs import (
    NAMESPACE,
    SET,
    apply_listener_rbac,
    example_runner_set,
    listener_kubeconfig,
    one_set,
    start_burst,
)
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import PersonalAccessToken
from shared.actions.models import RunnerScaleSet

GHA_LISTENER = str(Path(sys.executable).parent / "gha-listener")
IDLE_POLLS = 3
LISTENER_USER = f"system:serviceaccount:{NAMESPACE}:gha-listener"
WITHIN = 300.0


@dataclass
class Sample:
    mode: str
    idle_rss_kib: int
    burst_rss_kib: int
    peak_kib: int


async def until(predicate: Callable[[], bool]) -> None:
    """Sample `predicate` (state of the emulators in this loop) until it holds."""
    async with asyncio.timeout(WITHIN):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.05)


def status_kib(pid: int, field: str) -> int:
    found = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert found is not None, field
    return int(found.group(1))


def exec_kubeconfig(kube: KubeEmulator, token: str, folder: Path) -> dict[str, object]:
    """The identity of `token`, handed over by an exec credential plugin."""
    plugin = folder / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(f"import json\nprint(json.dumps({json.dumps(credential)}))\n")
    config = kube.kubeconfig_dict(token=token)
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
        }
    }
    return config


async def measure(mode: str, jobs: int) -> Sample:
    async with (
        KubeEmulator(kubelet=False) as kube,
        ActionsEmulator(long_poll_timeout=1.0) as gh,
    ):
        names, token, client, scale_set = await one_set(kube, gh, jobs)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            if mode == "light":
                kubeconfig = listener_kubeconfig(kube, folder)
            else:
                sa_token = kube.service_account_token(NAMESPACE, "gha-listener")
                kubeconfig = folder / "kubeconfig"
                kubeconfig.write_text(yaml.safe_dump(exec_kubeconfig(kube, sa_token, folder)))
            config = folder / "config.json"
            config.write_text(
                json.dumps(
                    {
                        "configure_url": gh.config_url(),
                        "ephemeral_runner_set_namespace": NAMESPACE,
                        "ephemeral_runner_set_name": SET,
                        "runner_scale_set_id": scale_set.id,
                        "max_runners": max(jobs, 1),
                        "metrics_addr": "127.0.0.1:0",
                    }
                )
            )
            proc = await start_listener(config, token=token, kubeconfig=kubeconfig)
            try:
                await until(lambda: gh.state.count("get_message") >= IDLE_POLLS)
                idle = status_kib(proc.pid, "VmRSS")
                runners = await start_burst(gh, client, scale_set, names, job_seconds=60.0)
                store_key = ("actions.github.com", "ephemeralrunners")

                def all_running() -> bool:
                    return all(
                        (kube.store.get(store_key, NAMESPACE, name) or {})
                        .get("status", {})
                        .get("phase")
                        == "Running"
                        for name in names
                    )

                await until(all_running)
                burst = status_kib(proc.pid, "VmRSS")
                peak = status_kib(proc.pid, "VmHWM")
                for task in runners:
                    task.cancel()
                await asyncio.gather(*runners, return_exceptions=True)
            finally:
                proc.terminate()
                await proc.wait()
        await client.aclose()
    return Sample(mode=mode, idle_rss_kib=idle, burst_rss_kib=burst, peak_kib=peak)


async def run(jobs: int) -> list[Sample]:
    return [await measure(mode, jobs) for mode in ("light", "client library")]


def set_object(runner_set: dict[str, Any], name: str) -> dict[str, Any]:
    other = copy.deepcopy(runner_set)
    other["metadata"] = {"name": name, "namespace": NAMESPACE}
    return other


def apply_sets(
    kube: KubeEmulator, names: list[str], *, role: Callable[[dict[str, Any]], None]
) -> None:
    """The listener's RBAC (`role` names the sets in its Role) and an EphemeralRunnerSet per name,
    each the example set renamed."""
    apply_listener_rbac(kube, role)
    runner_set = example_runner_set()
    for name in names:
        kube.apply(set_object(runner_set, name))


async def write_set_configs(
    client: ActionsClient, config_url: str, folder: Path, names: list[str], *, leases: bool = False
) -> Path:
    """A config directory in `folder`, a file per set, each set registered with the Actions
    service first; with `leases`, each set stands by on a Lease of its own name."""
    sets = folder / "sets"
    sets.mkdir()
    for name in names:
        scale_set = await client.create_runner_scale_set(RunnerScaleSet(name=name))
        config: dict[str, object] = {
            "configure_url": config_url,
            "ephemeral_runner_set_namespace": NAMESPACE,
            "ephemeral_runner_set_name": name,
            "runner_scale_set_id": scale_set.id,
            "metrics_addr": "127.0.0.1:0",
        }
        if leases:
            config["standby_lease_name"] = name
        (sets / f"{name}.json").write_text(json.dumps(config))
    return sets


async def start_listener(
    config: Path, *, token: str, kubeconfig: Path
) -> asyncio.subprocess.Process:
    """The real `gha-listener` on the config file or directory `config`, its output dropped."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LISTENER_CONFIG_PATH": str(config),
        "LISTENER_GITHUB_TOKEN": token,
        "KUBECONFIG": str(kubeconfig),
    }
    return await asyncio.create_subprocess_exec(
        GHA_LISTENER, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


@dataclass
class SetsSample:
    """One `gha-listener` process serving some scale sets, from its start until every set's
    session is open and has polled IDLE_POLLS times."""

    rss_kib: int
    kube_requests: int
    """Sent by the listener's identity."""
    actions_requests: int
    sessions: int


async def measure_sets(count: int) -> int:
    """Idle VmRSS (KiB) of one `gha-listener` process serving `count` scale sets (a config
    directory), once every set's session is open and has polled IDLE_POLLS times."""
    return (await sample_sets(count)).rss_kib


async def sample_sets(count: int) -> SetsSample:
    """`measure_sets` with the requests the process sent and the sessions it holds."""
    async with (
        KubeEmulator(kubelet=False) as kube,
        ActionsEmulator(long_poll_timeout=1.0) as gh,
    ):
        kube.apply_crds(project_crds())
        names = [SET] + [f"{SET}-{index}" for index in range(1, count)]
        apply_sets(kube, names, role=lambda doc: doc["rules"][1].update(resourceNames=names))
        token = gh.add_pat()
        client = ActionsClient(config_url=gh.config_url(), credentials=PersonalAccessToken(token))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            sets = await write_set_configs(client, gh.config_url(), folder, names)
            kubeconfig = listener_kubeconfig(kube, folder)
            setup_requests = len(gh.state.requests)
            proc = await start_listener(
                sets if count > 1 else sets / f"{SET}.json", token=token, kubeconfig=kubeconfig
            )
            try:
                await until(
                    lambda: (
                        len(gh.state.sessions) == count
                        and gh.state.count("get_message") >= IDLE_POLLS * count
                    )
                )
                sample = SetsSample(
                    rss_kib=status_kib(proc.pid, "VmRSS"),
                    kube_requests=kube.requests.count(user=LISTENER_USER),
                    actions_requests=len(gh.state.requests) - setup_requests,
                    sessions=len(gh.state.sessions),
                )
            finally:
                proc.terminate()
                await proc.wait()
        await client.aclose()
    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument(
        "--sets",
        default="",
        help="comma-separated scale set counts (e.g. 1,10,100): idle RSS of one process serving "
        "that many, instead of the one-set comparison",
    )
    args = parser.parse_args()
    if args.sets:
        counts = [int(count) for count in args.sets.split(",")]
        print("| scale sets in one process | idle RSS MB | MB per set beyond the first |")
        print("|---|---|---|")
        one: int | None = None
        for count in counts:
            rss = asyncio.run(measure_sets(count))
            one = rss if count == 1 else one
            per_set = (
                f"{(rss - one) / 1024 / (count - 1):.2f}" if one is not None and count > 1 else ""
            )
            print(f"| {count} | {rss / 1024:.1f} | {per_set} |")
        return
    samples = asyncio.run(run(args.jobs))
    print(f"one scale set, burst of {args.jobs} jobs")
    print("| Kubernetes client | idle RSS MB | RSS after the burst MB | peak MB |")
    print("|---|---|---|---|")
    for s in samples:
        print(
            f"| {s.mode} | {s.idle_rss_kib / 1024:.1f} | {s.burst_rss_kib / 1024:.1f} "
            f"| {s.peak_kib / 1024:.1f} |"
        )
    light, heavy = samples
    print(f"idle light / client library: {light.idle_rss_kib / heavy.idle_rss_kib:.2f}")


if __name__ == "__main__":
    main()
