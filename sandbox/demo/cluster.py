"""`gha-sandbox demo`: the whole system on the embedded emulators.

Both emulators run in this process (the kubelet's runner containers are the Actions emulator's
simulated runners); the controller and the listener run as real `gha-controller` and
`gha-listener` subprocesses, as they would in a cluster and under `docker run`, each with the
token of its ServiceAccount and the RBAC of `manifests/`, so the demo also proves that those
permissions are enough. Jobs are queued on the
Actions emulator; the demo prints the scale set as it scales up, runs the jobs and scales back.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sandbox.actions import ActionsEmulator
from sandbox.kube import KubeEmulator
from shared.api.crds import PRINTER_COLUMNS, custom_resource_definition

NAMESPACE = "arc-runners"
SCALE_SET = "demo-runners"
MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
LISTENER_RBAC = MANIFESTS / "listener" / "rbac.yaml"
CONTROLLER_RBAC = (MANIFESTS / "namespace.yaml", MANIFESTS / "controller-rbac.yaml")
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    jobs: int
    duration: float
    min_runners: int
    max_runners: int
    timeout: float
    forever: bool


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listener_rbac(*, namespace: str, name: str) -> list[dict[str, Any]]:
    """manifests/listener/rbac.yaml, pointed at a namespace and the EphemeralRunnerSet `name`."""
    docs = [d for d in yaml.safe_load_all(LISTENER_RBAC.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        for rule in doc.get("rules", []):
            if "resourceNames" in rule:
                rule["resourceNames"] = [name]
    return docs


def github_secret(*, namespace: str, pat: str, name: str = "github-config") -> dict[str, Any]:
    """The GitHub config Secret an EphemeralRunnerSet names in `githubConfigSecret`."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"github_token": base64.b64encode(pat.encode()).decode()},
    }


def runner_set(
    *, name: str, namespace: str, config_url: str, scale_set_id: int, secret: str = "github-config"
) -> dict[str, Any]:
    """An EphemeralRunnerSet at zero replicas whose runners run the simulated runner image."""
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "actions.github.com/scale-set-name": name,
                "actions.github.com/scale-set-namespace": namespace,
            },
        },
        "spec": {
            "replicas": 0,
            "patchID": 0,
            "ephemeralRunnerSpec": {
                "githubConfigUrl": config_url,
                "githubConfigSecret": secret,
                "runnerScaleSetId": scale_set_id,
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "runner",
                            "image": "ghcr.io/actions/actions-runner:latest",
                            "command": ["/home/runner/run.sh"],
                        }
                    ],
                },
            },
        },
    }


def setup_cluster(
    kube: KubeEmulator,
    *,
    config_url: str,
    pat: str,
    scale_set_id: int,
    namespace: str = NAMESPACE,
    name: str = SCALE_SET,
) -> None:
    """CRDs, the controller's and the listener's RBAC from manifests/, the runners' namespace,
    the GitHub Secret and the EphemeralRunnerSet `name`."""
    kube.apply_crds(custom_resource_definition(kind) for kind in PRINTER_COLUMNS)
    for path in CONTROLLER_RBAC:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                kube.apply(doc)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.apply(github_secret(namespace=namespace, pat=pat))
    for doc in listener_rbac(namespace=namespace, name=name):
        kube.apply(doc)
    kube.apply(
        runner_set(name=name, namespace=namespace, config_url=config_url, scale_set_id=scale_set_id)
    )


@contextlib.asynccontextmanager
async def _process(
    *args: str, env: dict[str, str], log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A subprocess logging to a file, stopped with SIGTERM (then SIGKILL) on exit."""
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", *args, env={**os.environ, **env}, stdout=out, stderr=out
        )
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), timeout=15)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def _runner_phases(kube: KubeEmulator) -> Counter[str]:
    phases: Counter[str] = Counter()
    for obj in kube.store.items(("actions.github.com", "ephemeralrunners"), NAMESPACE):
        phases[(obj.get("status") or {}).get("phase") or "New"] += 1
    return phases


def _replicas(kube: KubeEmulator) -> int:
    ers = kube.store.get(("actions.github.com", "ephemeralrunnersets"), NAMESPACE, SCALE_SET)
    return int(((ers or {}).get("spec") or {}).get("replicas") or 0)


async def run_demo(options: DemoOptions, workdir: Path) -> int:
    async with (
        ActionsEmulator(long_poll_timeout=2.0) as gh,
        KubeEmulator(container_runtime=gh.runtime) as kube,
    ):
        pat = gh.add_pat()
        scale_set = gh.state.create_scale_set(
            name=SCALE_SET, runner_group_id=1, labels=[], runner_setting={}
        )
        setup_cluster(kube, scale_set_id=scale_set.id, config_url=gh.config_url(), pat=pat)
        kube.write_kubeconfig(
            workdir / "controller.kubeconfig",
            token=kube.service_account_token(CONTROLLER_NAMESPACE, "gha-controller"),
        )
        kube.write_kubeconfig(
            workdir / "listener.kubeconfig",
            token=kube.service_account_token(NAMESPACE, "gha-listener"),
        )
        config = {
            "configure_url": gh.config_url(),
            "github_token": pat,
            "ephemeral_runner_set_namespace": NAMESPACE,
            "ephemeral_runner_set_name": SCALE_SET,
            "runner_scale_set_id": scale_set.id,
            "min_runners": options.min_runners,
            "max_runners": options.max_runners,
            "metrics_addr": f"127.0.0.1:{_free_port()}",
            "long_poll_timeout_seconds": 10,
        }
        config_path = workdir / "listener-config.json"
        config_path.write_text(json.dumps(config))
        config_path.chmod(0o600)
        print(f"sandbox: kube {kube.url}, actions {gh.url}, logs and kubeconfigs in {workdir}")
        controller_env = {
            "KUBECONFIG": str(workdir / "controller.kubeconfig"),
            "GHA_CONTROLLER_LEASE_NAMESPACE": CONTROLLER_NAMESPACE,
            "GHA_CONTROLLER_METRICS_PORT": str(_free_port()),
            "GHA_CONTROLLER_HEALTH_PORT": str(_free_port()),
        }
        listener_env = {
            "KUBECONFIG": str(workdir / "listener.kubeconfig"),
            "LISTENER_CONFIG_PATH": str(config_path),
        }
        async with (
            _process("controller", env=controller_env, log=workdir / "controller.log"),
            _process("listener", env=listener_env, log=workdir / "listener.log") as listener,
        ):
            code = await _drive(gh, kube, options)
            if listener.returncode is None:
                listener.send_signal(signal.SIGTERM)
            listener_code = await asyncio.wait_for(listener.wait(), timeout=15)
            print(f"listener stopped with exit code {listener_code}")
            return code or listener_code


async def _drive(gh: ActionsEmulator, kube: KubeEmulator, options: DemoOptions) -> int:
    job_ids = [
        gh.enqueue_job(labels=[SCALE_SET], duration=options.duration, display_name=f"job-{i}")
        for i in range(options.jobs)
    ]
    started = time.monotonic()
    last = ""
    while True:
        jobs = Counter(gh.state.jobs[i].state for i in job_ids)
        phases = _runner_phases(kube)
        line = (
            f"replicas={_replicas(kube)} runners={dict(sorted(phases.items()))} "
            f"jobs={dict(sorted(jobs.items()))}"
        )
        if line != last:
            print(f"{time.monotonic() - started:6.1f}s {line}", flush=True)
            last = line
        done = jobs["completed"] == len(job_ids)
        if done and not options.forever and sum(phases.values()) == options.min_runners:
            print(f"all {len(job_ids)} jobs completed; scaled back to {options.min_runners}")
            return 0
        if not options.forever and time.monotonic() - started > options.timeout:
            print(f"gave up after {options.timeout:.0f}s: {line}", file=sys.stderr)
            return 1
        await asyncio.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gha-sandbox demo",
        description="Run the controller and a listener against the embedded emulators, queue "
        "jobs, and watch the scale set scale up, run them and scale back.",
    )
    parser.add_argument("--jobs", type=int, default=5, help="jobs to queue (default 5)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds each job runs")
    parser.add_argument("--min-runners", type=int, default=0)
    parser.add_argument("--max-runners", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after (seconds)")
    parser.add_argument("--forever", action="store_true", help="keep running until Ctrl-C")
    parser.add_argument("--workdir", type=Path, help="where logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.jobs < 0 or args.min_runners < 0 or args.max_runners < args.min_runners:
        parser.error("needs jobs >= 0 and 0 <= min-runners <= max-runners")
    options = DemoOptions(
        jobs=args.jobs,
        duration=args.duration,
        min_runners=args.min_runners,
        max_runners=args.max_runners,
        timeout=args.timeout,
        forever=args.forever,
    )
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gha-sandbox-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(run_demo(options, workdir))
    except KeyboardInterrupt:
        return 130
