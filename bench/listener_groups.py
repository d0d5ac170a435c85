"""Many scale sets: one listener pod per set (ARC's) against listener groups of up to 100 sets
(docs/autoscaling.md#listener-groups), at 100 and 1,000 sets, in one run.

Listener side, measured on the real `gha-listener` (`bench.listener_memory.sample_sets`): one
process serving 1 set and one serving 100 (a full group), from its start until every set's
session is open and has polled three times: idle RSS, the Kubernetes requests of its identity,
the Actions requests, the sessions. N sets one pod per set are N single-set processes; grouped,
N/100 processes of 100 sets (a group serves at most 100).

Controller side, measured on the AutoscalingListener reconciler over the Kubernetes emulator (the
tests' rig with the controller's RBAC, no kubelet): N AutoscalingListeners made at once, each
alone or in groups of 100, until every pod exists and the queues are idle: the pods, and the
controller's Kubernetes requests (by its identity) and writes.

    .venv/bin/python -m bench.listener_groups --sets 100,1000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass
from typing import Any

from bench.listener_memory import SetsSample, sample_sets
from controller.autoscalinglistener.group import MAX_MEMBERS
from sandbox.actions.emulator import ActionsEmulator
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.api.names import ANNOTATION_LISTENER_GROUP
from shared.kube.objects import POD
from shared.typedefs import JSONDict
from tests.controller.autoscaling import ars_body
from tests.controller.conftest import (
    CONTROLLER_USER,
    LISTENER_IMAGE,
    Rig,
    RigOptions,
    metric,
    open_rig,
)

NAMESPACE = "bench-groups"
WRITES = ("create", "update", "patch", "delete")


async def settle(rig: Rig) -> None:
    """Until the controller's queue is empty and no reconcile runs, three looks in a row (the
    rig's own wait gives up after seconds; a thousand listeners take longer)."""
    idle = 0
    while idle < 3:
        text = rig.metrics()
        busy = metric(text, "workqueue_depth") or metric(text, "controller_runtime_active_workers")
        idle = 0 if busy else idle + 1
        await asyncio.sleep(0.2)


@dataclass
class ControllerSample:
    sets: int
    grouped: bool
    pods: int
    requests: int
    writes: int
    seconds: float


def listener_body(rig: Rig, index: int, *, grouped: bool, replicas: int = 1) -> JSONDict:
    name = f"set-{index:04}"
    meta: dict[str, Any] = {"name": f"{name}-listener", "namespace": rig.system_namespace}
    if grouped:
        meta["annotations"] = {ANNOTATION_LISTENER_GROUP: f"g{index // MAX_MEMBERS}"}
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": meta,
        "spec": {
            "githubConfigUrl": rig.config_url,
            "githubConfigSecret": "github-secret",
            "runnerScaleSetId": rig.scale_set_id,
            "autoscalingRunnerSetNamespace": rig.namespace,
            "autoscalingRunnerSetName": name,
            "ephemeralRunnerSetName": name,
            "maxRunners": 5,
            "minRunners": 0,
            "image": LISTENER_IMAGE,
            **({"listenerReplicas": replicas} if replicas > 1 else {}),
        },
    }


async def controller_side(sets: int, *, grouped: bool, replicas: int = 1) -> ControllerSample:
    """With `replicas`, every set asks for that many listener pods (standby)."""
    options = RigOptions(controllers=("autoscalinglistener",), kubelet=False)
    async with (
        ActionsEmulator() as actions,
        open_rig(options, namespace=NAMESPACE, actions=actions) as rig,
    ):
        for index in range(sets):
            body = ars_body(rig, f"set-{index:04}")
            await rig.objects.create(AUTOSCALING_RUNNER_SET, rig.namespace, body)
        await settle(rig)
        rig.kube.requests.reset()
        started = time.monotonic()
        for index in range(sets):
            await rig.objects.create(
                AUTOSCALING_LISTENER,
                rig.system_namespace,
                listener_body(rig, index, grouped=grouped, replicas=replicas),
            )
        want = (-(-sets // MAX_MEMBERS) if grouped else sets) * replicas

        pods_key = (POD.group, POD.plural)

        async def all_pods() -> bool:
            # The emulator's store, not a LIST: a thousand pods listed every 20 ms would be
            # most of what the benchmark measured.
            return sum(1 for _ in rig.kube.store.items(pods_key, rig.system_namespace)) == want

        await rig.until(all_pods, within=1200, what=f"{want} listener pods")
        await settle(rig)
        seconds = time.monotonic() - started
        pods = len((await rig.objects.list(POD, rig.system_namespace))["items"])
        requests = rig.kube.requests.count(user=CONTROLLER_USER)
        writes = sum(rig.kube.requests.count(user=CONTROLLER_USER, verb=v) for v in WRITES)
    return ControllerSample(sets, grouped, pods, requests, writes, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sets", default="100,1000", help="comma-separated set counts")
    args = parser.parse_args()
    counts = [int(count) for count in args.sets.split(",")]
    one: SetsSample = asyncio.run(sample_sets(1))
    full: SetsSample = asyncio.run(sample_sets(MAX_MEMBERS))
    print("listener processes (measured):")
    print(
        "| sets in the process | idle RSS MB | Kubernetes requests | Actions requests | sessions |"
    )
    print("|---|---|---|---|---|")
    for size, sample in ((1, one), (MAX_MEMBERS, full)):
        print(
            f"| {size} | {sample.rss_kib / 1024:.1f} | {sample.kube_requests} "
            f"| {sample.actions_requests} | {sample.sessions} |"
        )
    print()
    print(
        "| sets | layout | listener pods | listener RSS total MB | listener Kubernetes requests "
        "| listener Actions requests | sessions | controller requests | controller writes "
        "| seconds to all pods |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for count in counts:
        groups = -(-count // MAX_MEMBERS)
        for grouped in (False, True):
            side = asyncio.run(controller_side(count, grouped=grouped))
            processes, sample = (groups, full) if grouped else (count, one)
            layout = f"groups of {MAX_MEMBERS}" if grouped else "one pod per set"
            print(
                f"| {count} | {layout} | {side.pods} | {processes * sample.rss_kib / 1024:.0f} "
                f"| {processes * sample.kube_requests} | {processes * sample.actions_requests} "
                f"| {processes * sample.sessions} | {side.requests} | {side.writes} "
                f"| {side.seconds:.1f} |"
            )


if __name__ == "__main__":
    main()
