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

from bench.listener_jobs import NAMESPACE, ROOT, SET, runner_object, setup_cluster
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
        kube.apply_crds(project_crds())
        setup_cluster(kube)
        ers = kube.store.get(("actions.github.com", "ephemeralrunnersets"), NAMESPACE, SET)
        assert ers is not None
        names = [f"runner-{i}" for i in range(jobs)]
        for name in names:
            kube.apply(runner_object(ers, name))
        token = gh.add_pat()
        client = ActionsClient(config_url=gh.config_url(), credentials=PersonalAccessToken(token))
        scale_set = await client.create_runner_scale_set(RunnerScaleSet(name=SET))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            sa_token = kube.service_account_token(NAMESPACE, "gha-listener")
            kubeconfig = folder / "kubeconfig"
            if mode == "light":
                kube.write_kubeconfig(kubeconfig, token=sa_token)
            else:
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
            env = {
                "PATH": os.environ.get("PATH", ""),
                "LISTENER_CONFIG_PATH": str(config),
                "LISTENER_GITHUB_TOKEN": token,
                "KUBECONFIG": str(kubeconfig),
            }
            proc = await asyncio.create_subprocess_exec(
                GHA_LISTENER,
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                await until(lambda: gh.state.count("get_message") >= IDLE_POLLS)
                idle = status_kib(proc.pid, "VmRSS")
                runners = []
                for name in names:
                    jit_config = await client.generate_jit_runner_config(scale_set.id, name=name)
                    jit = jit_config.encoded_jit_config.get_secret_value()
                    runners.append(asyncio.create_task(gh.runtime.run_runner(jit)))
                for _ in names:
                    gh.enqueue_job(labels=[SET], duration=60.0)
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
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for doc in yaml.safe_load_all((ROOT / "manifests/listener/rbac.yaml").read_text()):
            doc["metadata"]["namespace"] = NAMESPACE
            for subject in doc.get("subjects", []):
                subject["namespace"] = NAMESPACE
            if doc["kind"] == "Role":
                doc["rules"][1]["resourceNames"] = names
            kube.apply(doc)
        runner_set = yaml.safe_load(
            (ROOT / "manifests/examples/docker-run/ephemeralrunnerset.yaml").read_text()
        )
        for name in names:
            kube.apply(set_object(runner_set, name))
        token = gh.add_pat()
        client = ActionsClient(config_url=gh.config_url(), credentials=PersonalAccessToken(token))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            sets = folder / "sets"
            sets.mkdir()
            for name in names:
                scale_set = await client.create_runner_scale_set(RunnerScaleSet(name=name))
                (sets / f"{name}.json").write_text(
                    json.dumps(
                        {
                            "configure_url": gh.config_url(),
                            "ephemeral_runner_set_namespace": NAMESPACE,
                            "ephemeral_runner_set_name": name,
                            "runner_scale_set_id": scale_set.id,
                            "metrics_addr": "127.0.0.1:0",
                        }
                    )
                )
            kubeconfig = folder / "kubeconfig"
            kube.write_kubeconfig(
                kubeconfig, token=kube.service_account_token(NAMESPACE, "gha-listener")
            )
            env = {
                "PATH": os.environ.get("PATH", ""),
                "LISTENER_CONFIG_PATH": str(sets if count > 1 else sets / f"{SET}.json"),
                "LISTENER_GITHUB_TOKEN": token,
                "KUBECONFIG": str(kubeconfig),
            }
            setup_requests = len(gh.state.requests)
            proc = await asyncio.create_subprocess_exec(
                GHA_LISTENER,
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
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
