"""The one home of the project's type aliases: how raw JSON and raw Kubernetes objects are typed.

`JSONDict` is the working type of any decoded JSON object. The `TypedDict`s below name the wire
shapes the code reads field by field (in the manner of kopf's `RawMeta`): metadata, owner
references, and the status of the runner kinds. They are `total=False` because the wire omits
empty fields; `shared/kube/views.py` and `shared/api/views.py` hand them out after checking that
the JSON is an object, so a malformed object reads as an empty one.
"""

from __future__ import annotations

from typing import Any, TypedDict

JSONDict = dict[str, Any]
"""A decoded JSON object: a Kubernetes object, a patch, a message body."""


class RawOwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class RawMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[RawOwnerReference]
    managedFields: list[JSONDict]


class RawEphemeralRunnerStatus(TypedDict, total=False):
    phase: str
    ready: bool
    reason: str
    message: str
    runnerId: int
    runnerName: str
    failures: dict[str, str]
    """Pod uid -> when that pod's failure was recorded."""
    jobRequestId: int
    jobRepositoryName: str
    jobId: str
    workflowRunId: int
    jobWorkflowRef: str
    jobDisplayName: str


class RawEphemeralRunnerSetStatus(TypedDict, total=False):
    phase: str
    currentReplicas: int
    pendingEphemeralRunners: int
    runningEphemeralRunners: int
    failedEphemeralRunners: int
    appliedActionableRevision: int
    finishedRunnerCleanupPatchID: int
