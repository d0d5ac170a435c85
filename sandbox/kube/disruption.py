"""kube-controller-manager's disruption controller, simulated
(docs/sandbox-kube.md#poddisruptionbudgets).

Each PodDisruptionBudget's status is computed as a pure value (`budget_status`) from the pods its
selector matches and, for `maxUnavailable` or a percentage `minAvailable`, the scale of those
pods' controllers; then written through `/status` unless it is up to date, as the real controller
judges it (`up_to_date`). A budget is synced when it is written, when a pod it selects (before or
after the write) or a workload of its namespace changes, and when an entry of `disruptedPods`
expires; the pods it selects are kept per budget from the pod events. A budget whose expected
pods cannot be counted (a controller without a scale subresource, such as a custom resource
without one, or no controller found) gets the fail-safe status: `disruptionsAllowed: 0` and
`DisruptionAllowed=False` with reason `SyncFailed` and the error as message, its other fields
(observedGeneration included) as they were, written on every such sync. Given
kube-controller-manager's request log, each status write is recorded as the real controller's
`update poddisruptionbudgets/status` (docs/sandbox-kube.md#the-disruption-controllers-requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.faults import Requests, record_controller_request
from sandbox.kube.kinds.disruptionbudgets import STATUS_COUNTS
from sandbox.kube.registry import Registry
from sandbox.kube.status import ApiError, qualified
from sandbox.kube.store import Event, Store, TypeKey
from sandbox.kube.workloads import selector_matches

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.disruption")

PDBS: TypeKey = ("policy", "poddisruptionbudgets")
PODS: TypeKey = ("", "pods")
DEPLOYMENTS: TypeKey = ("apps", "deployments")
REPLICASETS: TypeKey = ("apps", "replicasets")
STATEFULSETS: TypeKey = ("apps", "statefulsets")
RCS: TypeKey = ("", "replicationcontrollers")
WORKLOADS = (DEPLOYMENTS, REPLICASETS, STATEFULSETS, RCS)
# How long an eviction's entry in disruptedPods keeps its pod out of currentHealthy
# (the controller's DeletionTimeout).
DELETION_TIMEOUT = dt.timedelta(minutes=2)
CONDITION = "DisruptionAllowed"
# kube-controller-manager's disruption controller as kubeadm runs it (`--use-service-account-
# credentials`): each controller with its own ServiceAccount.
DISRUPTION_USER = "system:serviceaccount:kube-system:disruption-controller"


class SyncFailed(Exception):
    """The expected pods cannot be counted; the message is the condition's."""


@dataclass(frozen=True)
class Budget:
    status: Obj
    recheck: dt.datetime | None = None
    failed: bool = False
    """The fail-safe status, which the real controller writes without comparing (failSafe)."""


ScaleOf = Callable[[Obj, str], tuple[str, int] | None]
"""(controller reference, namespace) -> (the controller's uid, its replicas), None when that
kind of controller is not found; raises SyncFailed when the kind has no scale."""


def selects(selector: Any, labels: dict[str, str]) -> bool:
    """policy/v1: a missing selector selects nothing, an empty one every pod."""
    if not isinstance(selector, dict):
        return False
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True
    return selector_matches(selector, labels)


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _controller(pod: Obj) -> Obj | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def scaled(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return int(value)


def expected_scale(pods: list[Obj], scale_of: ScaleOf) -> int:
    scales: dict[str, int] = {}
    for pod in pods:
        ref = _controller(pod)
        if ref is None:
            continue  # unmanaged: the real controller only records an UnmanagedPods Event
        if ref.get("uid") in scales:
            continue
        found = scale_of(ref, pod["metadata"].get("namespace", ""))
        if found is None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def _parse(when: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None


def disruption_condition(status: Obj, *, now: str) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition: SufficientPods or InsufficientPods."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    set_condition(
        status,
        value="True" if allowed else "False",
        reason="SufficientPods" if allowed else "InsufficientPods",
        message="",
        now=now,
    )


def set_condition(status: Obj, *, value: str, reason: str, message: str, now: str) -> None:
    """apimeta.SetStatusCondition on `DisruptionAllowed`: the transition time moves only when
    the condition's status does."""
    conditions = status.setdefault("conditions", [])
    new = {
        "type": CONDITION,
        "status": value,
        "observedGeneration": status.get("observedGeneration", 0),
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    for i, old in enumerate(conditions):
        if old.get("type") == CONDITION:
            if old.get("status") == value:
                new["lastTransitionTime"] = old.get("lastTransitionTime", now)
            conditions[i] = new
            return
    conditions.append(new)


def budget_status(pdb: Obj, pods: list[Obj], *, scale_of: ScaleOf, now: dt.datetime) -> Budget:
    """The status the controller writes (trySync, then failSafe when it fails)."""
    spec = pdb.get("spec") or {}
    old = copy.deepcopy(pdb.get("status") or {})
    stamp = timestamp(now)
    try:
        expected, desired = _expected(spec, pods, scale_of)
    except SyncFailed as exc:
        old["disruptionsAllowed"] = 0
        set_condition(old, value="False", reason="SyncFailed", message=str(exc), now=stamp)
        return Budget(old, failed=True)
    disrupted: dict[str, str] = {}
    recheck: dt.datetime | None = None
    listed = old.get("disruptedPods") or {}
    for pod in pods:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") or name not in listed:
            continue
        when = _parse(listed[name])
        if when is None or when + DELETION_TIMEOUT < now:
            continue  # expected to be deleted by now: counted again
        disrupted[name] = listed[name]
        if recheck is None or when + DELETION_TIMEOUT < recheck:
            recheck = when + DELETION_TIMEOUT
    healthy = sum(
        1
        for pod in pods
        if not pod["metadata"].get("deletionTimestamp")
        and pod["metadata"]["name"] not in disrupted
        and _ready(pod)
    )
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status: Obj = {
        "observedGeneration": pdb["metadata"].get("generation", 0),
        "disruptedPods": disrupted,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": old.get("conditions") or [],
    }
    if not disrupted:
        status.pop("disruptedPods")
    disruption_condition(status, now=stamp)
    return Budget(status, recheck)


def _expected(spec: Obj, pods: list[Obj], scale_of: ScaleOf) -> tuple[int, int]:
    """getExpectedPodCount: (expected pods, desired healthy)."""
    maximum, minimum = spec.get("maxUnavailable"), spec.get("minAvailable")
    if maximum is not None:
        expected = expected_scale(pods, scale_of)
        return expected, max(expected - scaled(maximum, expected), 0)
    if isinstance(minimum, int):
        return len(pods), minimum
    if isinstance(minimum, str):
        expected = expected_scale(pods, scale_of)
        return expected, scaled(minimum, expected)
    return 0, 0


@dataclass(slots=True)
class _Selection:
    """A budget's selector and the names of its namespace's pods it picks, kept from the pod
    events, so that a sync reads what the budget selects rather than every pod of the namespace
    (the real controller reads its informer's pods; this emulator's syncs were 45 ms per busy
    runner at 2,000 runners when each one scanned the namespace: BENCHMARKS.md, "Nothing
    skipped under lag")."""

    selector: Any
    pods: set[str]


class DisruptionController:
    def __init__(
        self,
        *,
        registry: Registry,
        store: Store,
        requests: Callable[[], Requests | None] = lambda: None,
    ) -> None:
        self.registry = registry
        self.store = store
        self.requests = requests
        """Where kube-controller-manager's requests are counted, read at each write: the
        emulator gives the garbage collector's (`Controllers.requests`), so one switch counts
        both controllers; None leaves them out of the request log."""
        self._rechecks: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._budgets: dict[str, dict[str, _Selection]] = {}
        """Per namespace, its budgets by name."""
        self.syncs = 0
        """Budget syncs run."""
        self.examined = 0
        """Pods read: by a sync (the pods its budget selects), and by a budget's selection
        built anew (every pod of its namespace, once per selector)."""

    async def run(self) -> None:
        sub = self.store.subscribe({PDBS, PODS, *WORKLOADS})
        try:
            for pdb in list(self.store.items(PDBS)):
                self._select(pdb)
                self.sync(pdb["metadata"]["namespace"], pdb["metadata"]["name"])
            while True:
                # As kube-controller-manager's work queue does, a burst of events syncs each
                # budget they touch once: every event already queued is read before any sync.
                dirty: dict[tuple[str, str], None] = {}
                self._touched(await sub.queue.get(), dirty)
                while not sub.queue.empty():
                    self._touched(sub.queue.get_nowait(), dirty)
                for ns, name in dirty:
                    self.sync(ns, name)
        finally:
            self.store.unsubscribe(sub)
            for handle in self._rechecks.values():
                handle.cancel()

    def _select(self, pdb: Obj) -> _Selection:
        """The budget's selection, built anew from its namespace's pods when its selector is
        new or changed."""
        meta = pdb["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        selector = (pdb.get("spec") or {}).get("selector")
        budgets = self._budgets.setdefault(ns, {})
        found = budgets.get(name)
        if found is not None and found.selector == selector:
            return found
        pods: set[str] = set()
        for pod in self.store.items(PODS, ns):
            self.examined += 1
            if selects(selector, pod["metadata"].get("labels") or {}):
                pods.add(pod["metadata"]["name"])
        found = budgets[name] = _Selection(copy.deepcopy(selector), pods)
        return found

    def _touched(self, item: object, dirty: dict[tuple[str, str], None]) -> None:
        """The budgets an event concerns: a budget's own; for a pod, the budgets of its
        namespace selecting it before or after the write (the real controller looks the pod's
        budget up on each pod event rather than syncing every budget of the namespace), each
        budget's selection updated; for a workload, every budget of its namespace (its scale
        may be any of theirs)."""
        if not isinstance(item, Event):
            return
        meta = item.obj["metadata"]
        ns = meta.get("namespace", "")
        if item.key == PDBS:
            if item.type == "DELETED":
                budgets = self._budgets.get(ns, {})
                budgets.pop(meta["name"], None)
                if not budgets:
                    self._budgets.pop(ns, None)
            else:
                self._select(item.obj)
                dirty[(ns, meta["name"])] = None
            return
        budgets = self._budgets.get(ns, {})
        if item.key != PODS:
            for name in budgets:
                dirty[(ns, name)] = None
            return
        pod, labels = meta["name"], meta.get("labels") or {}
        for name, selection in budgets.items():
            picks = item.type != "DELETED" and selects(selection.selector, labels)
            if picks:
                selection.pods.add(pod)
            elif pod in selection.pods:
                selection.pods.discard(pod)
            else:
                continue
            dirty[(ns, name)] = None

    def sync(self, ns: str, name: str) -> None:
        self.syncs += 1
        rt = self.registry.catalog.preferred(*PDBS)
        pdb = self.store.get(PDBS, ns, name)
        if rt is None or pdb is None or pdb["metadata"].get("deletionTimestamp"):
            return
        selection = self._select(pdb)
        # The pods as stored now: one whose write is still queued here is synced again with it.
        pods = []
        for pod_name in sorted(selection.pods):
            self.examined += 1
            pod = self.store.get(PODS, ns, pod_name)
            if pod is not None and selects(selection.selector, pod["metadata"].get("labels") or {}):
                pods.append(pod)
        now = self.registry.clock()
        budget = budget_status(pdb, pods, scale_of=self._scale_of, now=now)
        if budget.recheck is not None:
            self._recheck(ns, name, (budget.recheck - now).total_seconds())
        if not budget.failed and up_to_date(pdb, budget.status):
            return
        new = copy.deepcopy(pdb)
        new["status"] = budget.status
        code = 200
        try:
            # The budget is read from the store, never from a lagging cache as the real
            # controller's informer may be: no write here is answered 409.
            self.registry.commit(rt, cur=pdb, new=new, subresource="status")
        except ApiError as exc:
            code = exc.code
            log.debug("disruption controller status write failed: %s", exc.message)
        record_controller_request(
            self.requests(),
            user=DISRUPTION_USER,
            verb="update",
            resource=PDBS[1],
            subresource="status",
            namespace=ns,
            code=code,
        )

    def _recheck(self, ns: str, name: str, seconds: float) -> None:
        key = (ns, name)
        handle = self._rechecks.pop(key, None)
        if handle is not None:
            handle.cancel()
        with contextlib.suppress(RuntimeError):
            self._rechecks[key] = asyncio.get_running_loop().call_later(
                max(seconds, 0.0) + 0.01, self.sync, ns, name
            )

    def _scale_of(self, ref: Obj, ns: str) -> tuple[str, int] | None:
        """The finders of the real controller, in order: ReplicationController, Deployment (via
        its ReplicaSet), ReplicaSet, StatefulSet, then any kind's scale subresource."""
        api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        name, uid = str(ref.get("name", "")), str(ref.get("uid", ""))
        owned = {
            ("", "ReplicationController"): RCS,
            ("apps", "ReplicaSet"): REPLICASETS,
            ("extensions", "ReplicaSet"): REPLICASETS,
            ("apps", "StatefulSet"): STATEFULSETS,
        }
        key = owned.get((group, kind))
        if key is not None:
            obj = self.store.get(key, ns, name)
            if obj is None or obj["metadata"]["uid"] != uid:
                return None
            if key == REPLICASETS:
                parent = _controller(obj)
                if parent is not None and parent.get("kind") == "Deployment":
                    deployment = self.store.get(DEPLOYMENTS, ns, str(parent.get("name", "")))
                    if deployment is None or deployment["metadata"]["uid"] != parent.get("uid"):
                        return None
                    return uid_replicas(deployment)
            return uid_replicas(obj)
        rt = self.registry.catalog.by_kind(api_version, kind)
        if rt is None:
            raise SyncFailed(f'no matches for kind "{kind}" in version "{api_version}"')
        if "scale" not in rt.subresources:
            raise SyncFailed(
                f"{qualified(rt.plural, rt.group)} does not implement the scale subresource"
            )
        obj = self.store.get(rt.key, ns, name)
        if obj is None or obj["metadata"]["uid"] != uid:
            return None
        return uid_replicas(obj)


def uid_replicas(obj: Obj) -> tuple[str, int]:
    replicas = (obj.get("spec") or {}).get("replicas")
    return obj["metadata"]["uid"], 1 if replicas is None else int(replicas)


def up_to_date(pdb: Obj, status: Obj) -> bool:
    """updatePdbStatus's test before it writes: the stored status has the new counts and
    `disruptedPods` (none and empty alike), has observed the budget's generation, and its
    condition has the status and reason its `disruptionsAllowed` calls for (ConditionsAreUpToDate:
    message and times not compared). docs/sandbox-kube.md#the-disruption-controllers-requests."""
    old = pdb.get("status") or {}
    if any(int(old.get(k) or 0) != int(status.get(k) or 0) for k in STATUS_COUNTS):
        return False
    if (old.get("disruptedPods") or {}) != (status.get("disruptedPods") or {}):
        return False
    if old.get("observedGeneration") != pdb["metadata"].get("generation"):
        return False
    for c in old.get("conditions") or []:
        if c.get("type") == CONDITION:
            allowed = int(old.get("disruptionsAllowed") or 0) > 0
            expected = ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
            return (c.get("status"), c.get("reason")) == expected
    return False


def matching(budgets: Iterable[Obj], pod: Obj) -> list[Obj]:
    """The budgets of the pod's namespace whose selector picks it (the eviction's view: a
    missing or empty selector picks nothing there)."""
    labels = pod["metadata"].get("labels") or {}
    ns = pod["metadata"].get("namespace")
    out = []
    for pdb in budgets:
        selector = (pdb.get("spec") or {}).get("selector")
        if pdb["metadata"].get("namespace") != ns or not isinstance(selector, dict):
            continue
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            continue
        if selector_matches(selector, labels):
            out.append(pdb)
    return out
