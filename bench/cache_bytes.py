"""Bytes per cached object, with and without the cache's strip (managedFields and kubectl's
last-applied-configuration annotation, and for Pods every top-level field but the metadata and
status, which is all the controller's readers declare), measured in one run.

The objects are the ones the controller caches, built by the project's own builders from the
docker-run example set: the EphemeralRunnerSet as `kubectl apply` leaves it, an EphemeralRunner
as the controller creates it with the status the listener and controller write, and its Pod with
a kubelet's status. The API server's metadata is added the way a server adds it: uid,
resourceVersion, creationTimestamp, and one managedFields entry per writer whose `fieldsV1`
lists the fields that writer set. Memory is Python's own accounting (tracemalloc) of N parsed
objects held in a list, which is what the store holds.

    .venv/bin/python bench/cache_bytes.py --objects 1000
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller.ephemeralrunner.objects import runner_pod
from controller.ephemeralrunnerset.objects import new_ephemeral_runner
from controller.runtime.cache import ALWAYS_KEPT, LAST_APPLIED, keep_only, strip

EXAMPLE = (
    Path(__file__).resolve().parents[1]
    / "manifests"
    / "examples"
    / "docker-run"
    / "ephemeralrunnerset.yaml"
)
NOW = "2026-12-02T17:00:00Z"


def fields_v1(value: Any) -> Any:
    """The field set of `value` as a server records it: `f:` per key, `k:` per named item."""
    if isinstance(value, dict):
        return {f"f:{key}": fields_v1(item) for key, item in value.items()}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(i, dict) and "name" in i for i in value)
    ):
        return {
            "k:" + json.dumps({"name": item["name"]}, separators=(",", ":")): fields_v1(item)
            for item in value
        }
    return {}


def managed(manager: str, fields: Any, *, subresource: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": NOW,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(fields),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def served(obj: dict[str, Any], writers: list[dict[str, Any]]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    meta.pop("generateName", None)
    meta.setdefault("name", "my-runners-abcde")
    meta.update(
        uid=str(uuid.uuid4()),
        resourceVersion="123456",
        creationTimestamp=NOW,
        generation=1,
        managedFields=writers,
    )
    return obj


def runner_set() -> dict[str, Any]:
    applied = yaml.safe_load(EXAMPLE.read_text())
    obj = copy.deepcopy(applied)
    obj["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(applied, separators=(",", ":"))}
    status = {"currentReplicas": 10, "pendingEphemeralRunners": 2, "runningEphemeralRunners": 8}
    obj["status"] = status
    return served(
        obj,
        [
            managed(
                "kubectl-client-side-apply", {"metadata": obj["metadata"], "spec": obj["spec"]}
            ),
            managed("gha-listener", {"spec": {"replicas": 1, "patchID": 1}}),
            managed("gha-controller", {"status": status}, subresource="status"),
        ],
    )


def runner(runner_set: dict[str, Any]) -> dict[str, Any]:
    obj = new_ephemeral_runner(runner_set, patch_id=1, revision=1)
    obj["metadata"]["name"] = "my-runners-abcde"
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "EphemeralRunnerSet",
            "name": runner_set["metadata"]["name"],
            "uid": runner_set["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    job = {
        "jobRequestId": 1234,
        "jobRepositoryName": "my-org/my-repo",
        "jobId": "5f1e2d3c-0000-4000-8000-000000000000",
        "workflowRunId": 98765,
        "jobWorkflowRef": "my-org/my-repo/.github/workflows/ci.yml@refs/heads/main",
        "jobDisplayName": "build",
    }
    controller_status = {"runnerId": 42, "runnerName": "my-runners-abcde", "ready": True}
    obj["status"] = {"phase": "Running", **controller_status, **job}
    return served(
        obj,
        [
            managed("gha-controller", {"metadata": obj["metadata"], "spec": obj["spec"]}),
            managed("gha-controller", {"status": controller_status}, subresource="status"),
            managed("gha-listener", {"status": {"phase": 1, **job}}, subresource="status"),
        ],
    )


def pod(runner: dict[str, Any]) -> dict[str, Any]:
    obj = runner_pod(runner)
    obj["metadata"]["name"] = runner["metadata"]["name"]
    status = {
        "phase": "Running",
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": NOW}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.7",
        "startTime": NOW,
        "containerStatuses": [
            {
                "name": "runner",
                "ready": True,
                "restartCount": 0,
                "image": "ghcr.io/actions/actions-runner:latest",
                "imageID": "ghcr.io/actions/actions-runner@sha256:" + "0" * 64,
                "containerID": "containerd://" + "1" * 64,
                "state": {"running": {"startedAt": NOW}},
            }
        ],
    }
    obj["status"] = status
    return served(
        obj,
        [
            managed("gha-controller", {"metadata": obj["metadata"], "spec": obj["spec"]}),
            managed("kubelet", {"status": status}, subresource="status"),
        ],
    )


POD_KEPT = frozenset({*ALWAYS_KEPT, "status"})


def cached(obj: dict[str, Any], kept: frozenset[str] | None) -> dict[str, Any]:
    """`obj` as the controller's cache keeps it."""
    strip(obj)
    return keep_only(obj, kept) if kept is not None else obj


def held_bytes(
    wire: bytes, count: int, prepare: Callable[[dict[str, Any]], dict[str, Any]]
) -> float:
    """Bytes Python holds per object for `count` objects parsed from `wire` and prepared."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = []
    for _ in range(count):
        held.append(prepare(json.loads(wire)))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    the_set = runner_set()
    the_runner = runner(the_set)
    # The object and the top-level fields the controller's cache keeps of it (None: all).
    samples = {
        "EphemeralRunnerSet": (the_set, None),
        "EphemeralRunner": (the_runner, None),
        "Pod": (pod(the_runner), POD_KEPT),
    }
    print(f"objects per kind: {args.objects}")
    print("| kind | JSON bytes | as cached | held bytes | as cached | cached / full |")
    print("|---|---|---|---|---|---|")
    for kind, (obj, kept) in samples.items():
        wire = json.dumps(obj).encode()
        wire_cached = json.dumps(cached(copy.deepcopy(obj), kept)).encode()
        full = held_bytes(wire, args.objects, lambda o: o)
        lean = held_bytes(wire, args.objects, functools.partial(cached, kept=kept))
        print(
            f"| {kind} | {len(wire)} | {len(wire_cached)} | {full:.0f} | {lean:.0f} "
            f"| {lean / full:.2f} |"
        )


if __name__ == "__main__":
    main()
