"""Bytes per cached object: as decoded, and as the controller's informers keep it (their
transform, `controller.runtime.cache.Transform`, configured as `gha-controller` configures it:
managedFields and kubectl's last-applied-configuration annotation dropped, Pods without their
spec and with only the status fields the reconcilers read, equal labels, annotations,
finalizers and specs shared between objects), measured in one run.

The objects are the ones the controller caches, built by the project's own builders from the
docker-run example set: the EphemeralRunnerSet as `kubectl apply` leaves it, an EphemeralRunner
as the controller creates it with the status the listener and controller write, and its Pod with
a kubelet's status. The API server's metadata is added the way a server adds it: uid,
resourceVersion, creationTimestamp, and one managedFields entry per writer whose `fieldsV1`
lists the fields that writer set. Memory is Python's own accounting (tracemalloc) of N objects
decoded as the object client decodes them (`shared.wire.decode_json`) and held in a list, which is
what the store holds; the N objects differ in name, uid and resourceVersion, as a set's runners do.

    .venv/bin/python bench/cache_bytes.py --objects 1000
"""

from __future__ import annotations

import argparse
import copy
import json
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller.app import POD_STATUS_READ
from controller.ephemeralrunner.objects import runner_pod
from controller.ephemeralrunnerset.objects import new_ephemeral_runner
from controller.runtime.cache import LAST_APPLIED, Transform, strip
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import POD, Kind
from shared.wire import decode_json

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


def transform(kind: Kind) -> Transform:
    """The transform of the kind's informer in `gha-controller`."""
    made = Transform(kind)
    if kind == POD:
        made.reads(("status",))
        made.narrow("status", POD_STATUS_READ)
    return made


def stripped(kind: Kind) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What the cache kept before its transform (at c0cc7bf): the decoded object with
    managedFields and the annotation dropped in place, and for Pods the spec."""

    def prepare(obj: dict[str, Any]) -> dict[str, Any]:
        strip(obj)
        if kind == POD:
            obj.pop("spec", None)
        return obj

    return prepare


def wires(obj: dict[str, Any], count: int) -> list[bytes]:
    """`count` copies of `obj` as the server sends them, each with its own name, uid and
    resourceVersion."""
    out = []
    for i in range(count):
        meta = obj["metadata"]
        copy_ = {
            **obj,
            "metadata": {**meta, "name": f"{meta['name']}-{i}", "uid": str(uuid.uuid4())},
        }
        copy_["metadata"]["resourceVersion"] = str(1000 + i)
        out.append(json.dumps(copy_).encode())
    return out


def held_bytes(wire: list[bytes], prepare: Callable[[dict[str, Any]], dict[str, Any]]) -> float:
    """Bytes Python holds per object for the objects parsed from `wire` and prepared."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = [prepare(decode_json(w, limit=len(w), what="an object")) for w in wire]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del held
    return (after - before) / len(wire)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    the_set = runner_set()
    the_runner = runner(the_set)
    samples = {
        EPHEMERAL_RUNNER_SET: the_set,
        EPHEMERAL_RUNNER: the_runner,
        POD: pod(the_runner),
    }
    print(f"objects per kind: {args.objects}")
    print(
        "| kind | JSON bytes | as cached | held: decoded | stripped (before) | transformed "
        "| transformed / stripped |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind, obj in samples.items():
        wire = wires(obj, args.objects)
        wire_cached = json.dumps(transform(kind)(copy.deepcopy(obj))).encode()
        full = held_bytes(wire, lambda o: o)
        before = held_bytes(wire, stripped(kind))
        lean = held_bytes(wire, transform(kind))
        print(
            f"| {kind.kind} | {len(wire[0])} | {len(wire_cached)} | {full:.0f} | {before:.0f} "
            f"| {lean:.0f} | {lean / before:.2f} |"
        )


if __name__ == "__main__":
    main()
