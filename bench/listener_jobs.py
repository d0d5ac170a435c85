"""Listener cost and latency per job, against both emulators over loopback HTTP.

N EphemeralRunners (Pending) each get a simulated runner; N jobs are enqueued at once. Measured
until every job completed and the runner set settled back at 0 (patch id 0): the listener's
Kubernetes and Actions requests per job, and the time from a job's JobStarted being emitted to
its runner showing `Running` (the listener's own latency, the long poll included).

    .venv/bin/python bench/listener_jobs.py --jobs 50
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from listener.app import credentials_of, serve
from listener.config import ListenerSettings
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.actions.client import ActionsClient
from shared.actions.credentials import PersonalAccessToken
from shared.actions.models import RunnerScaleSet

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench"
SET = "my-runners"


def setup_cluster(kube: KubeEmulator) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for doc in yaml.safe_load_all((ROOT / "manifests/listener/rbac.yaml").read_text()):
        doc["metadata"]["namespace"] = NAMESPACE
        for subject in doc.get("subjects", []):
            subject["namespace"] = NAMESPACE
        kube.apply(doc)
    runner_set = yaml.safe_load(
        (ROOT / "manifests/examples/docker-run/ephemeralrunnerset.yaml").read_text()
    )
    runner_set["metadata"]["namespace"] = NAMESPACE
    kube.apply(runner_set)


def runner_object(runner_set: dict[str, Any], name: str) -> dict[str, Any]:
    """A runner of `runner_set`: the listener records jobs only on its own set's runners."""
    owner = {
        "apiVersion": runner_set["apiVersion"],
        "kind": runner_set["kind"],
        "name": runner_set["metadata"]["name"],
        "uid": runner_set["metadata"]["uid"],
        "controller": True,
    }
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": [owner]},
        "spec": copy.deepcopy(runner_set["spec"]["ephemeralRunnerSpec"]),
    }


async def run(jobs: int) -> None:
    async with KubeEmulator(kubelet=False) as kube, ActionsEmulator(long_poll_timeout=50) as gh:
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
            kubeconfig = Path(tmp) / "kubeconfig"
            kube.write_kubeconfig(
                kubeconfig, token=kube.service_account_token(NAMESPACE, "gha-listener")
            )
            os.environ["KUBECONFIG"] = str(kubeconfig)
            settings = ListenerSettings(
                configure_url=gh.config_url(),
                github_token=token,
                ephemeral_runner_set_namespace=NAMESPACE,
                ephemeral_runner_set_name=SET,
                runner_scale_set_id=scale_set.id,
                max_runners=jobs,
                metrics_addr="",
            )
            stop = asyncio.Event()
            listener = asyncio.create_task(serve(settings, credentials_of(settings), stop=stop))
            await gh.state.wait_for(
                lambda: gh.state.count("create_session", status=200) > 0, within=30
            )
            kube.requests.reset()
            gh_requests_before = len(gh.state.requests)
            started = time.monotonic()
            runners = []
            for name in names:
                config = await client.generate_jit_runner_config(scale_set.id, name=name)
                jit = config.encoded_jit_config.get_secret_value()
                runners.append(asyncio.create_task(gh.runtime.run_runner(jit)))
            for _ in names:
                gh.enqueue_job(labels=[SET], duration=0.5)
            running_seen: dict[str, float] = {}
            store_key = ("actions.github.com", "ephemeralrunners")
            while True:
                now = time.monotonic()
                for name in names:
                    obj = kube.store.get(store_key, NAMESPACE, name) or {}
                    if name not in running_seen and obj.get("status", {}).get("phase") == "Running":
                        running_seen[name] = now
                spec = kube.store.get(("actions.github.com", "ephemeralrunnersets"), NAMESPACE, SET)
                done = all(job.state == "completed" for job in gh.state.jobs.values())
                assert spec is not None
                if done and spec["spec"].get("replicas") == 0 and spec["spec"]["patchID"] == 0:
                    break
                await asyncio.sleep(0.005)
            elapsed = time.monotonic() - started
            stop.set()
            await listener
            await asyncio.gather(*runners, return_exceptions=True)
        await client.aclose()
    user = f"system:serviceaccount:{NAMESPACE}:gha-listener"
    kube_calls = Counter(
        f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
        for r in kube.requests.log
        if r.user == user
    )
    actions_calls = Counter(r.endpoint for r in gh.state.requests[gh_requests_before:])
    starts = {
        job.runner_name: job.runner_assign_time
        for job in gh.state.jobs.values()
        if job.runner_name and job.runner_assign_time is not None
    }
    # runner_assign_time is wall clock; convert the monotonic observations with one offset.
    offset = time.time() - time.monotonic()
    latencies = [
        (running_seen[name] + offset - starts[name]) * 1000
        for name in names
        if name in running_seen and name in starts
    ]
    print(f"jobs: {jobs}, all completed and settled in {elapsed:.2f}s")
    print(f"Running seen on {len(running_seen)} of {jobs} runners")
    print("listener Kubernetes requests:", dict(kube_calls), f"= {sum(kube_calls.values())}")
    print("Actions requests (listener and runners):", dict(actions_calls))
    if latencies:
        p90 = statistics.quantiles(latencies, n=10)[-1] if len(latencies) > 1 else latencies[0]
        print(
            f"JobStarted -> Running ms: median {statistics.median(latencies):.1f}, "
            f"p90 {p90:.1f}, max {max(latencies):.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=50)
    asyncio.run(run(parser.parse_args().jobs))


if __name__ == "__main__":
    main()
