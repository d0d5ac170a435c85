"""What projection predicates and lazy copies save, on a runner's life as the kubelet writes it.

1. Pod updates of one runner (scheduled, initialised, IP assigned, container creating, running
   and ready, terminated): how many wake the EphemeralRunner reconciler through `POD_TO_ER`,
   against ARC's ResourceVersionChangedPredicate, which passes every one.
2. Reconciling N cached EphemeralRunners of which a fraction changes: deep copies taken and time
   per reconcile, lazy (`LazyObject`) against eager (ARC's `obj.DeepCopy()` on every pass).

    .venv/bin/python bench/runtime_lazy.py --runners 2000 --changing 0.1
"""

from __future__ import annotations

import argparse
import copy
import itertools
import time
from collections.abc import Callable

from controller.ephemeralrunner.predicates import POD_TO_ER
from controller.runtime import LazyObject
from controller.runtime.lazy import copy_observer
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.typedefs import JSONDict


def pod_versions() -> list[JSONDict]:
    pod: JSONDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "runner", "image": "runner:2"}]},
        "status": {"phase": "Pending"},
    }
    steps: list[Callable[[JSONDict], object]] = [
        lambda p: p["spec"].update(nodeName="node-1"),
        lambda p: p["status"].update(conditions=[{"type": "PodScheduled", "status": "True"}]),
        lambda p: p["status"]["conditions"].append({"type": "Initialized", "status": "True"}),
        lambda p: p["status"].update(podIP="10.0.0.7", hostIP="192.168.0.3"),
        lambda p: p["status"].update(startTime="2026-01-01T00:00:00Z"),
        lambda p: p["status"].update(
            containerStatuses=[{"name": "runner", "state": {"waiting": {}}, "ready": False}]
        ),
        lambda p: p["status"].update(
            phase="Running",
            containerStatuses=[{"name": "runner", "state": {"running": {}}, "ready": True}],
        ),
        lambda p: p["status"]["conditions"].append({"type": "ContainersReady", "status": "True"}),
        lambda p: p["status"]["conditions"].append({"type": "Ready", "status": "True"}),
        lambda p: p["metadata"].update(labels={"pod-template-hash": "x"}),
        lambda p: p["status"].update(
            phase="Succeeded",
            containerStatuses=[{"name": "runner", "state": {"terminated": {}}, "ready": False}],
        ),
        lambda p: p["status"]["conditions"].__setitem__(-1, {"type": "Ready", "status": "False"}),
    ]
    versions = [pod]
    for i, step in enumerate(steps):
        nxt = copy.deepcopy(versions[-1])
        step(nxt)
        nxt["metadata"]["resourceVersion"] = str(i + 2)
        versions.append(nxt)
    return versions


def runner(i: int) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {
            "name": f"runner-{i}",
            "namespace": "ns",
            "resourceVersion": str(i),
            "labels": {f"label-{k}": "v" for k in range(8)},
            "finalizers": ["ephemeralrunner.actions.github.com/finalizer"],
            "ownerReferences": [{"kind": "EphemeralRunnerSet", "name": "set", "uid": "u"}],
        },
        "spec": {
            "githubConfigUrl": "https://github.com/o",
            "spec": {
                "containers": [{"name": "runner", "env": [{"name": f"E{k}"} for k in range(10)]}]
            },
        },
        "status": {"phase": "Pending", "runnerId": i, "ready": False},
    }


def reconcile_lazy(obj: JSONDict, change: bool) -> JSONDict:
    handle = LazyObject(obj, kind=EPHEMERAL_RUNNER)
    if handle.object["status"]["phase"] == "Pending" and change:
        handle.mutate()["status"]["ready"] = True
    return handle.patch()


def reconcile_eager(obj: JSONDict, change: bool) -> JSONDict:
    original = copy.deepcopy(obj)
    live = copy.deepcopy(obj)
    if live["status"]["phase"] == "Pending" and change:
        live["status"]["ready"] = True
    return {"status": {"ready": True}} if live != original else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runners", type=int, default=2000)
    parser.add_argument("--changing", type=float, default=0.1)
    args = parser.parse_args()

    versions = pod_versions()
    updates = list(itertools.pairwise(versions))
    passed = sum(POD_TO_ER.update(old, new) for old, new in updates)
    print(f"Pod updates over one runner's life: {len(updates)}")
    print(f"- wake the reconciler with POD_TO_ER: {passed}")
    print(f"- wake it with ResourceVersionChangedPredicate (ARC): {len(updates)}")

    objs = [runner(i) for i in range(args.runners)]
    every = max(1, round(1 / args.changing)) if args.changing > 0 else 0
    changes = [bool(every) and i % every == 0 for i in range(args.runners)]
    lazy_copies: list[int] = []
    copy_observer.set(lambda: lazy_copies.append(1))
    for name, fn in (("eager (ARC DeepCopy)", reconcile_eager), ("lazy", reconcile_lazy)):
        started = time.perf_counter()
        for obj, change in zip(objs, changes, strict=True):
            fn(obj, change)
        per = (time.perf_counter() - started) / len(objs)
        copies = 2 * len(objs) if fn is reconcile_eager else len(lazy_copies)
        print(
            f"{name}: {per * 1e6:.1f} us per reconcile, {copies} deep copies for "
            f"{args.runners} runners ({sum(changes)} changing)"
        )


if __name__ == "__main__":
    main()
