"""What the Pod cache keeps of a pod's status (`controller.app.POD_STATUS_READ`) covers every
field the reconcilers' pod readers read: each reader runs on pods that reach all its branches,
wrapped so that every key it looks up is recorded, and each recorded path must be one the cache
keeps. A reader that starts reading a field the transform drops fails here, not in a cluster."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.app import POD_STATUS_READ
from controller.autoscalinglistener.rules import container_state, stopped, waiting_report
from controller.ephemeralrunner.rules import ObservedRunner, busy_pod_annotations, plan_runner
from controller.ephemeralrunner.timeline import with_cluster_moments
from controller.runtime.cache import Shape, project
from controller.settings import RunnerSettings
from shared.api.timeline import cluster_moments
from shared.kube.views import pod_ready
from shared.typedefs import JSONDict

Path = tuple[str, ...]
WHOLE = "*"

POD_SHAPE: Shape = {"apiVersion": None, "kind": None, "metadata": None, "status": POD_STATUS_READ}
NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
T = "2026-12-06T08:59:00Z"


class Recording(dict[str, Any]):
    """A JSON object that records the path of every key looked up in it (and `*` when all its
    items or values are read). A copy (`dict(recording)`) is not a read: what is then read of
    the copy's values is recorded by them."""

    def __init__(self, data: JSONDict, path: Path, seen: set[Path]) -> None:
        super().__init__({k: _wrap(v, (*path, k), seen) for k, v in data.items()})
        self._path, self._seen = path, seen

    def __getitem__(self, key: str) -> Any:
        self._seen.add((*self._path, key))
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._seen.add((*self._path, key))
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._seen.add((*self._path, str(key)))
        return super().__contains__(key)

    def items(self) -> Any:
        self._seen.add((*self._path, WHOLE))
        return super().items()

    def values(self) -> Any:
        self._seen.add((*self._path, WHOLE))
        return super().values()


def _wrap(value: Any, path: Path, seen: set[Path]) -> Any:
    if isinstance(value, dict):
        return Recording(value, path, seen)
    if isinstance(value, list):
        return [_wrap(v, path, seen) for v in value]
    return value


def kept(path: Path, shape: Shape | None) -> bool:
    """Whether the cache keeps what reading `path` reads."""
    for key in path:
        if shape is None:
            return True
        if key == WHOLE or key not in shape:
            return False
        shape = shape[key]
    return True


def container(name: str, state: JSONDict) -> JSONDict:
    return {
        "name": name,
        "state": state,
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": "ghcr.io/actions/actions-runner:latest",
        "imageID": "ghcr.io/actions/actions-runner@sha256:" + "0" * 64,
        "containerID": "containerd://" + "1" * 64,
        "started": True,
    }


def pod(
    *,
    phase: str = "Running",
    state: JSONDict | None = None,
    init: JSONDict | None = None,
    reason: str = "",
) -> JSONDict:
    status: JSONDict = {
        "phase": phase,
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": T, "lastProbeTime": None}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.7",
        "podIPs": [{"ip": "10.1.0.7"}],
        "qosClass": "BestEffort",
        "startTime": T,
        "containerStatuses": [
            container("runner", state or {"running": {"startedAt": T}}),
            container("listener", state or {"running": {"startedAt": T}}),
        ],
    }
    if init is not None:
        status["initContainerStatuses"] = [container("init", init)]
    if reason:
        status["reason"] = reason
        status["message"] = "why"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "r",
            "namespace": "ns",
            "uid": "pod-uid",
            "creationTimestamp": T,
            "annotations": {},
            "ownerReferences": [
                {"kind": "EphemeralRunner", "name": "r", "uid": "runner-uid", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "runner", "image": "runner"}]},
        "status": status,
    }


PODS = {
    "running": pod(),
    "waiting-stuck": pod(state={"waiting": {"reason": "ImagePullBackOff", "message": "m"}}),
    "waiting-permanent": pod(state={"waiting": {"reason": "InvalidImageName"}}),
    "succeeded": pod(state={"terminated": {"exitCode": 0, "reason": "Completed"}}),
    "failed-exit": pod(state={"terminated": {"exitCode": 1, "message": "boom"}}),
    "outdated": pod(state={"terminated": {"exitCode": 7}}),
    "phase-failed": pod(phase="Failed", reason="Evicted"),
    "init-failed": pod(init={"terminated": {"exitCode": 2, "reason": "Error"}}),
    "init-waiting": pod(init={"waiting": {"reason": "CreateContainerConfigError"}}),
}


def runner(**status: Any) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {"name": "r", "namespace": "ns", "uid": "runner-uid", "creationTimestamp": T},
        "spec": {"spec": {"containers": [{"name": "runner"}]}},
        "status": {"runnerId": 1, "phase": "Pending", **status},
    }


def plan(observed_pod: JSONDict) -> object:
    settings = RunnerSettings()
    results = []
    for owner in (runner(), runner(phase="Running", jobId="j", jobRequestId=1)):
        for promote in (False, True):
            decided = plan_runner(
                ObservedRunner(
                    runner=owner,
                    pod=observed_pod,
                    now=NOW,
                    policy=settings.failure_policy(),
                    listener_skips_running=promote,
                )
            )
            moments = (
                with_cluster_moments(decided.outcome, owner, observed_pod)
                if decided.outcome is not None
                else None
            )
            results.append((decided, moments, busy_pod_annotations(owner, observed_pod)))
    return results


READERS: dict[str, Callable[[JSONDict], object]] = {
    "runner plan": plan,
    "timeline": lambda p: cluster_moments(runner(), p),
    "readiness": pod_ready,
    "listener stopped": stopped,
    "listener container state": lambda p: [
        container_state(p, s) for s in ("running", "waiting", "terminated")
    ],
    "listener waiting report": waiting_report,
}


@pytest.mark.parametrize("reader", READERS)
def test_every_field_a_pod_reader_reads_is_kept(reader: str) -> None:
    seen: set[Path] = set()
    for sample in PODS.values():
        READERS[reader](Recording(copy.deepcopy(sample), (), seen))
    assert any(path[0] == "status" for path in seen), "the reader read no status"
    assert sorted(path for path in seen if not kept(path, POD_SHAPE)) == []


@pytest.mark.parametrize("reader", READERS)
def test_a_pod_reader_decides_the_same_on_the_cached_pod(reader: str) -> None:
    for name, sample in PODS.items():
        cached = project(copy.deepcopy(sample), POD_SHAPE)
        assert READERS[reader](cached) == READERS[reader](sample), name


def test_the_cached_status_leaves_out_what_no_reader_reads() -> None:
    cached = project(copy.deepcopy(PODS["running"]), POD_SHAPE)
    assert set(cached["status"]) == {"phase", "conditions", "containerStatuses"}
    assert set(cached["status"]["containerStatuses"][0]) == {"name", "state", "lastState"}
    assert "spec" not in cached


def test_the_check_fails_for_a_field_the_cache_drops() -> None:
    seen: set[Path] = set()
    Recording(copy.deepcopy(PODS["running"]), (), seen)["status"].get("podIP")
    assert not kept(("status", "podIP"), POD_SHAPE)
    assert [path for path in seen if not kept(path, POD_SHAPE)] == [("status", "podIP")]
