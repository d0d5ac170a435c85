"""The Deployment and ReplicaSet controllers of kube-controller-manager, simulated
(docs/sandbox-kube.md, "Workload controllers").

- ReplicaSet: keeps `spec.replicas` active pods (created from the template with a
  `<name>-xxxxx` generated name and a controller owner reference), deletes the surplus (not-ready
  and newest first), and reports replicas, fullyLabeledReplicas, readyReplicas,
  availableReplicas and observedGeneration.
- Deployment: one ReplicaSet per pod-template hash (`<name>-<hash>`, label `pod-template-hash` in
  its selector and template), the `deployment.kubernetes.io/revision` annotation, rolling updates
  within maxSurge/maxUnavailable (or Recreate), old ReplicaSets pruned past
  revisionHistoryLimit, and status with the Available and Progressing conditions
  `kubectl rollout status` reads.

Like the garbage collector it runs as one task fed by the store's events, so a rollout advances
as pods become ready, after the write that caused it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
from typing import Any

from sandbox.kube.clock import timestamp
from sandbox.kube.registry import Registry
from sandbox.kube.resources import ResourceType
from sandbox.kube.status import ApiError
from sandbox.kube.store import Event, Store, TypeKey

Obj = dict[str, Any]
log = logging.getLogger("sandbox.kube.workloads")

DEPLOYMENTS: TypeKey = ("apps", "deployments")
REPLICASETS: TypeKey = ("apps", "replicasets")
PODS: TypeKey = ("", "pods")
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# The alphabet apimachinery's rand.SafeEncodeString maps hash bytes onto (no vowels, no 0/1/3).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Obj) -> str:
    """A stable, label-safe hash of a pod template (the `pod-template-hash` value)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels and matchExpressions) selects `labels`; an empty
    or missing selector selects nothing, as for workload controllers."""
    if not isinstance(selector, dict):
        return False
    match = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not match and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    for expr in expressions:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _controller_uid(obj: Obj) -> str:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid", ""))
    return ""


def _owner_ref(owner: Obj, kind: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _active(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


def _replicas(spec: Obj) -> int:
    """`spec.replicas`, defaulted to 1 as the API server does for a missing or null value."""
    value = spec.get("replicas")
    return 1 if value is None else int(value)


def _scaled(value: Any, total: int, *, round_up: bool, default: str) -> int:
    value = default if value is None else value
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def _condition(status: Obj, kind: str, value: str, reason: str, message: str, now: str) -> None:
    conditions = status.setdefault("conditions", [])
    for cond in conditions:
        if cond["type"] == kind:
            if (cond["status"], cond["reason"], cond["message"]) != (value, reason, message):
                cond["lastUpdateTime"] = now
            if cond["status"] != value:
                cond["lastTransitionTime"] = now
            cond.update(status=value, reason=reason, message=message)
            return
    conditions.append(
        {
            "type": kind,
            "status": value,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
    )


class Workloads:
    def __init__(self, *, registry: Registry, store: Store) -> None:
        self.registry = registry
        self.store = store

    def _rt(self, key: TypeKey) -> ResourceType:
        rt = self.registry.catalog.preferred(*key)
        assert rt is not None
        return rt

    async def run(self) -> None:
        sub = self.store.subscribe({DEPLOYMENTS, REPLICASETS, PODS})
        try:
            for d in list(self.store.items(DEPLOYMENTS)):
                self._sync_deployment(d["metadata"]["namespace"], d["metadata"]["name"])
            for rs in list(self.store.items(REPLICASETS)):
                self._sync_replicaset(rs["metadata"]["namespace"], rs["metadata"]["name"])
            while True:
                item = await sub.queue.get()
                if isinstance(item, Event):
                    try:
                        self.handle(item)
                    except ApiError as exc:
                        log.debug("workload controller write failed: %s", exc.message)
                    except Exception:
                        # The objects are stored schema-less: one odd body must not stop
                        # every Deployment and ReplicaSet.
                        log.exception("workload controller failed on %s", item.key)
        finally:
            self.store.unsubscribe(sub)

    def handle(self, event: Event) -> None:
        obj = event.obj
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        if event.key == DEPLOYMENTS:
            if event.type != "DELETED":
                self._sync_deployment(ns, meta["name"])
            return
        if event.key == REPLICASETS and event.type != "DELETED":
            self._sync_replicaset(ns, meta["name"])
        elif event.key == PODS:
            owner = self.store.by_uid(_controller_uid(obj))
            if owner is not None and owner.get("kind") == "ReplicaSet":
                self._sync_replicaset(ns, owner["metadata"]["name"])
            return
        owner = self.store.by_uid(_controller_uid(obj))
        if owner is not None and owner.get("kind") == "Deployment":
            self._sync_deployment(ns, owner["metadata"]["name"])

    # --- ReplicaSet --------------------------------------------------------------------------

    def _pods_of(self, rs: Obj) -> list[Obj]:
        uid = rs["metadata"]["uid"]
        return [
            p
            for p in self.store.items(PODS, rs["metadata"]["namespace"])
            if _controller_uid(p) == uid
        ]

    def _sync_replicaset(self, ns: str, name: str) -> None:
        rs = self.store.get(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        want = _replicas(spec)
        active = [p for p in self._pods_of(rs) if _active(p)]
        failure = ""
        if len(active) < want:
            failure = self._create_pods(rs, want - len(active))
        elif len(active) > want:
            # Unready pods go first, then the newest, as the ReplicaSet controller ranks them.
            newest_first = sorted(
                active, key=lambda p: str(p["metadata"].get("creationTimestamp", "")), reverse=True
            )
            doomed = sorted(newest_first, key=_ready)[: len(active) - want]
            pods_rt = self._rt(PODS)
            for pod in doomed:
                try:
                    self.registry.delete(pods_rt, ns=ns, name=pod["metadata"]["name"], options={})
                except ApiError as exc:
                    log.debug("replicaset %s/%s: delete failed: %s", ns, name, exc.message)
        self._write_replicaset_status(ns, name, failure)

    def _create_pods(self, rs: Obj, count: int) -> str:
        template = copy.deepcopy((rs.get("spec") or {}).get("template") or {})
        meta = template.get("metadata") or {}
        pods_rt = self._rt(PODS)
        for _ in range(count):
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "generateName": f"{rs['metadata']['name']}-",
                    "labels": dict(meta.get("labels") or {}),
                    "annotations": dict(meta.get("annotations") or {}),
                    "ownerReferences": [_owner_ref(rs, "ReplicaSet")],
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
            }
            if not body["metadata"]["annotations"]:
                del body["metadata"]["annotations"]
            try:
                self.registry.create(pods_rt, ns=rs["metadata"]["namespace"], body=body)
            except ApiError as exc:
                return f'pods "{rs["metadata"]["name"]}-" is forbidden: {exc.message}'
        return ""

    def _write_replicaset_status(self, ns: str, name: str, failure: str) -> None:
        rs = self.store.get(REPLICASETS, ns, name)
        if rs is None:
            return
        labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
            "labels"
        ) or {}
        active = [p for p in self._pods_of(rs) if _active(p)]
        new = copy.deepcopy(rs)
        status: Obj = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(
                1
                for p in active
                if all(p["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
            ),
            "readyReplicas": sum(1 for p in active if _ready(p)),
            "availableReplicas": sum(1 for p in active if _ready(p)),
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        old_conditions = (rs.get("status") or {}).get("conditions") or []
        if failure:
            status["conditions"] = old_conditions
            _condition(
                status,
                "ReplicaFailure",
                "True",
                "FailedCreate",
                failure,
                timestamp(self.registry.clock()),
            )
        for key in ("readyReplicas", "availableReplicas", "fullyLabeledReplicas"):
            if not status[key]:
                del status[key]
        new["status"] = status
        if new != rs:
            self.registry.commit(self._rt(REPLICASETS), cur=rs, new=new, subresource="status")

    # --- Deployment --------------------------------------------------------------------------

    def _replicasets_of(self, d: Obj) -> list[Obj]:
        uid = d["metadata"]["uid"]
        return [
            rs
            for rs in self.store.items(REPLICASETS, d["metadata"]["namespace"])
            if _controller_uid(rs) == uid
        ]

    def _sync_deployment(self, ns: str, name: str) -> None:
        d = self.store.get(DEPLOYMENTS, ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        digest = template_hash(template)
        owned = self._replicasets_of(d)
        new_rs = next(
            (rs for rs in owned if rs["metadata"].get("labels", {}).get(HASH_LABEL) == digest),
            None,
        )
        old = [rs for rs in owned if rs is not new_rs]
        created = False
        if new_rs is None:
            new_rs = self._create_replicaset(d, template, digest, old)
            created = new_rs is not None
        if spec.get("paused"):
            self._write_deployment_status(ns, name, new_rs, created=created)
            return
        if new_rs is not None:
            self._roll(d, new_rs, old)
        self._prune(d)
        self._write_deployment_status(ns, name, new_rs, created=created)

    def _create_replicaset(self, d: Obj, template: Obj, digest: str, old: list[Obj]) -> Obj | None:
        meta = template.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), HASH_LABEL: digest}
        spec = d.get("spec") or {}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: digest}
        revision = 1 + max(
            (int(rs["metadata"].get("annotations", {}).get(REVISION, "0")) for rs in old),
            default=0,
        )
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{digest}",
                "labels": dict(meta["labels"]),
                "annotations": {
                    REVISION: str(revision),
                    DESIRED: str(_replicas(spec)),
                },
                "ownerReferences": [_owner_ref(d, "Deployment")],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": spec.get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        try:
            return self.registry.create(
                self._rt(REPLICASETS), ns=d["metadata"]["namespace"], body=body
            )
        except ApiError as exc:
            log.warning(
                "deployment %s: cannot create its ReplicaSet: %s",
                d["metadata"]["name"],
                exc.message,
            )
            return None

    def _scale(self, rs: Obj, replicas: int) -> None:
        if (rs.get("spec") or {}).get("replicas") == replicas:
            return
        new = copy.deepcopy(rs)
        new["spec"]["replicas"] = replicas
        self.registry.commit(self._rt(REPLICASETS), cur=rs, new=new)

    def _roll(self, d: Obj, new_rs: Obj, old: list[Obj]) -> None:
        spec = d.get("spec") or {}
        desired = _replicas(spec)
        strategy = spec.get("strategy") or {}
        live_old = [rs for rs in old if (rs.get("spec") or {}).get("replicas", 0) > 0]
        if strategy.get("type") == "Recreate":
            for rs in live_old:
                self._scale(rs, 0)
            if any(_active(p) for rs in old for p in self._pods_of(rs)):
                return
            self._scale(new_rs, desired)
            return
        rolling = strategy.get("rollingUpdate") or {}
        surge = _scaled(rolling.get("maxSurge"), desired, round_up=True, default="25%")
        unavailable = _scaled(rolling.get("maxUnavailable"), desired, round_up=False, default="25%")
        if surge == 0 and unavailable == 0:
            unavailable = 1
        if not live_old:
            self._scale(new_rs, desired)
            return
        everything = [new_rs, *live_old]
        total = sum((rs.get("spec") or {}).get("replicas", 0) for rs in everything)
        new_replicas = (new_rs.get("spec") or {}).get("replicas", 0)
        room = desired + surge - total
        if room > 0 and new_replicas < desired:
            self._scale(new_rs, min(desired, new_replicas + room))
        available = sum(
            (self.store.get(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"]) or rs)
            .get("status", {})
            .get("availableReplicas", 0)
            for rs in everything
        )
        budget = available - (desired - unavailable)
        for rs in sorted(live_old, key=lambda r: r["metadata"].get("creationTimestamp", "")):
            current = (rs.get("spec") or {}).get("replicas", 0)
            # Pods an old ReplicaSet cannot make available anyway go at once.
            unready = current - (rs.get("status") or {}).get("availableReplicas", 0)
            cut = min(current, max(unready, 0) + max(budget, 0))
            if cut <= 0:
                continue
            budget -= max(0, cut - max(unready, 0))
            self._scale(rs, current - cut)

    def _prune(self, d: Obj) -> None:
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        digest = template_hash((d.get("spec") or {}).get("template") or {})
        idle = sorted(
            (
                rs
                for rs in self._replicasets_of(d)
                if rs["metadata"].get("labels", {}).get(HASH_LABEL) != digest
                and not (rs.get("spec") or {}).get("replicas")
                and not (rs.get("status") or {}).get("replicas")
            ),
            key=lambda rs: int(rs["metadata"].get("annotations", {}).get(REVISION, "0")),
        )
        for rs in idle[: max(0, len(idle) - limit)]:
            self.registry.delete(
                self._rt(REPLICASETS),
                ns=rs["metadata"]["namespace"],
                name=rs["metadata"]["name"],
                options={},
            )

    def _write_deployment_status(
        self, ns: str, name: str, new_rs: Obj | None, *, created: bool
    ) -> None:
        d = self.store.get(DEPLOYMENTS, ns, name)
        if d is None:
            return
        spec = d.get("spec") or {}
        desired = _replicas(spec)
        sets = [
            self.store.get(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"]) or rs
            for rs in self._replicasets_of(d)
        ]
        current = self.store.get(REPLICASETS, ns, new_rs["metadata"]["name"]) if new_rs else None

        def count(rs: Obj | None, key: str) -> int:
            return int(((rs or {}).get("status") or {}).get(key, 0))

        replicas = sum(count(rs, "replicas") for rs in sets)
        available = sum(count(rs, "availableReplicas") for rs in sets)
        updated = count(current, "replicas")
        rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        max_unavailable = (
            0
            if (spec.get("strategy") or {}).get("type") == "Recreate"
            else _scaled(rolling.get("maxUnavailable"), desired, round_up=False, default="25%")
        )
        now = timestamp(self.registry.clock())
        new = copy.deepcopy(d)
        status = new.setdefault("status", {})
        status.update(
            observedGeneration=d["metadata"].get("generation", 1),
            replicas=replicas,
            updatedReplicas=updated,
            readyReplicas=sum(count(rs, "readyReplicas") for rs in sets),
            availableReplicas=available,
            unavailableReplicas=max(0, max(desired, replicas) - available),
        )
        for key in (
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
        ):
            if not status[key]:
                del status[key]
        if available >= desired - max_unavailable:
            _condition(
                status,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            )
        else:
            _condition(
                status,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            )
        rs_name = (current or new_rs or {}).get("metadata", {}).get("name", "")
        if current is not None:
            complete = (
                updated == desired
                and replicas == desired
                and available == desired
                and count(current, "observedGeneration") >= current["metadata"].get("generation", 1)
            )
            if complete:
                reason, message = (
                    "NewReplicaSetAvailable",
                    f'ReplicaSet "{rs_name}" has successfully progressed.',
                )
            elif created:
                reason, message = "NewReplicaSetCreated", f'Created new replica set "{rs_name}"'
            else:
                reason, message = "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.'
            _condition(status, "Progressing", "True", reason, message, now)
        if current is not None:
            revision = current["metadata"].get("annotations", {}).get(REVISION)
            if revision:
                new["metadata"].setdefault("annotations", {})[REVISION] = revision
        if new == d:
            return
        rt = self._rt(DEPLOYMENTS)
        if new["metadata"] != d["metadata"]:
            meta_only = copy.deepcopy(d)
            meta_only["metadata"] = new["metadata"]
            d = self.registry.commit(rt, cur=d, new=meta_only)
            new["metadata"] = copy.deepcopy(d["metadata"])
        if new.get("status") != d.get("status"):
            self.registry.commit(rt, cur=d, new=new, subresource="status")
