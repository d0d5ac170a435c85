"""The kube-controller-manager work the project relies on, simulated
(docs/sandbox-kube.md#deletion-and-garbage-collection).

- Garbage collector: background deletion of dependents whose owners are all gone, foreground
  deletion (dependents first, then the `foregroundDeletion` finalizer), and orphaning.
- Namespace controller: a terminating namespace's contents are deleted, then the namespace.
- ServiceAccount and root-CA publishers: every namespace gets ServiceAccount `default` and
  ConfigMap `kube-root-ca.crt`.
- The control-plane node's kubelet: a pod deleted there stops at once (the simulated kubelet
  runs only its own node's pods).

It runs as one task fed by the store's event stream, so cascades happen asynchronously after the
triggering write, as on a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any

from sandbox.kube.bootstrap import CONTROL_PLANE
from sandbox.kube.faults import Requests, record_controller_request
from sandbox.kube.registry import FOREGROUND, ORPHAN, Registry
from sandbox.kube.status import ApiError
from sandbox.kube.store import Event, Store, TypeKey

Obj = dict[str, Any]
Ref = tuple[TypeKey, str, str]
log = logging.getLogger("sandbox.kube.gc")

NAMESPACES: TypeKey = ("", "namespaces")
PODS: TypeKey = ("", "pods")
RBAC_GROUP = "rbac.authorization.k8s.io"
# kube-controller-manager's garbage collector as kubeadm runs it (`--use-service-account-
# credentials`): each controller with its own ServiceAccount.
GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"


class Controllers:
    def __init__(self, *, registry: Registry, store: Store, ca_pem: str, gc: bool = True) -> None:
        self.registry = registry
        self.store = store
        self.ca_pem = ca_pem
        self.gc = gc
        self.dependents: dict[str, set[Ref]] = {}
        self.owners_of: dict[Ref, set[str]] = {}
        self.blocks: dict[Ref, set[str]] = {}
        """The owners each dependent blocks (`blockOwnerDeletion`), as last seen: like the real
        collector's graph, a dependent blocks its owner's foreground deletion until its delete
        event arrives."""
        self.deleting_dependents: set[str] = set()
        """Owners whose foreground deletion the collector has begun."""
        self.terminating: set[str] = set()
        self.requests: Requests | None = None
        """Where the garbage collector's requests are counted, as the real one sends them
        (docs/sandbox.md#the-garbage-collectors-requests); None (the default) leaves them out of
        the request log, as they were before."""

    def _count(self, verb: str, key: TypeKey, ns: str, code: int = 200) -> None:
        record_controller_request(
            self.requests, user=GC_USER, verb=verb, resource=key[1], namespace=ns, code=code
        )

    async def run(self) -> None:
        sub = self.store.subscribe(None)
        try:
            while True:
                item = await sub.queue.get()
                if isinstance(item, Event):
                    try:
                        self.handle(item)
                    except ApiError as exc:
                        log.debug("controller write failed: %s", exc.message)
        finally:
            self.store.unsubscribe(sub)

    def seed_namespace(self, name: str) -> None:
        """What the ServiceAccount and root-CA controllers create in a new namespace."""
        sa = self.registry.catalog.preferred("", "serviceaccounts")
        cm = self.registry.catalog.preferred("", "configmaps")
        if sa is None or cm is None:
            return
        with contextlib.suppress(ApiError):
            self.registry.create(sa, ns=name, body={"metadata": {"name": "default"}})
        with contextlib.suppress(ApiError):
            self.registry.create(
                cm,
                ns=name,
                body={
                    "metadata": {
                        "name": "kube-root-ca.crt",
                        "annotations": {
                            "kubernetes.io/description": "Contains a CA bundle that can be used "
                            "to verify the kube-apiserver when using internal endpoints such as "
                            "the internal service IP or kubernetes.default.svc. No other usage "
                            "is guaranteed across distributions of Kubernetes clusters."
                        },
                    },
                    "data": {"ca.crt": self.ca_pem},
                },
            )

    def handle(self, ev: Event) -> None:
        meta = ev.obj["metadata"]
        ref: Ref = (ev.key, meta.get("namespace", ""), meta["name"])
        unblocked = self._index(ev, ref)
        if ev.key == NAMESPACES:
            if ev.type == "ADDED":
                self.seed_namespace(meta["name"])
            elif ev.type == "MODIFIED" and meta.get("deletionTimestamp"):
                self.terminating.add(meta["name"])
                self._sweep_namespace(meta["name"])
            return
        ns = meta.get("namespace", "")
        if (
            ev.key == PODS
            and ev.type == "MODIFIED"
            and meta.get("deletionTimestamp")
            and (ev.obj.get("spec") or {}).get("nodeName") == CONTROL_PLANE
        ):
            self._stop_on_control_plane(ns, meta["name"])
        if ev.type == "DELETED":
            self.deleting_dependents.discard(meta["uid"])
            if self.gc:
                self._collect(meta["uid"])
                for owner in list(ev.obj["metadata"].get("ownerReferences") or []):
                    self._check_foreground(owner.get("uid", ""))
            if ns in self.terminating:
                self._sweep_namespace(ns)
            return
        if self.gc:
            # An owner a dependent stops blocking gets a pass, as when the dependent goes.
            for uid in unblocked:
                self._check_foreground(uid)
        if self.gc and meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if FOREGROUND in finalizers:
                self._foreground(ev, meta["uid"])
            elif ORPHAN in finalizers:
                self._orphan(ev, meta["uid"])

    def _stop_on_control_plane(self, ns: str, name: str) -> None:
        rt = self.registry.catalog.preferred(*PODS)
        if rt is not None:
            self.registry.delete(rt, ns=ns, name=name, options={"gracePeriodSeconds": 0})

    def _index(self, ev: Event, ref: Ref) -> set[str]:
        """The graph updated with the event; returns the owners the object no longer blocks."""
        before = self.blocks.pop(ref, set())
        for uid in self.owners_of.pop(ref, set()):
            deps = self.dependents.get(uid)
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self.dependents[uid]
        if ev.type == "DELETED":
            return before
        references = ev.obj["metadata"].get("ownerReferences") or []
        owners = {o.get("uid", "") for o in references}
        if owners:
            self.owners_of[ref] = owners
            for uid in owners:
                self.dependents.setdefault(uid, set()).add(ref)
        blocked = {o.get("uid", "") for o in references if o.get("blockOwnerDeletion")}
        if blocked:
            self.blocks[ref] = blocked
        return before - blocked

    def _objects(self, refs: set[Ref]) -> list[tuple[TypeKey, Obj]]:
        out = []
        for key, ns, name in sorted(refs):
            obj = self.store.get(key, ns, name)
            if obj is not None:
                out.append((key, obj))
        return out

    def _delete(
        self,
        key: TypeKey,
        obj: Obj,
        *,
        policy: str,
        collector: bool = False,
        owner: TypeKey | None = None,
    ) -> None:
        """`owner`: the kind of an owner that still exists (a foreground deletion's), which the
        real collector reads too before it deletes the dependent; an owner that is gone it knows
        from its absent-owner cache."""
        rt = self.registry.catalog.preferred(*key)
        if rt is None:
            return
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        if collector:
            # The real collector reads each dependent live before it deletes it.
            self._count("get", key, ns)
            if owner is not None:
                self._count("get", owner, ns)
        code = 200
        try:
            self.registry.delete(
                rt,
                ns=ns,
                name=meta["name"],
                options={"propagationPolicy": policy, "preconditions": {"uid": meta["uid"]}},
            )
        except ApiError as exc:
            code = exc.code
        if collector:
            self._count("delete", key, ns, code)

    def _collect(self, owner_uid: str) -> None:
        """Background: delete dependents once none of their owners exists."""
        for key, obj in self._objects(self.dependents.get(owner_uid, set())):
            owners = [o.get("uid") for o in obj["metadata"].get("ownerReferences") or []]
            if all(self.store.by_uid(str(u)) is None for u in owners):
                self._delete(key, obj, policy="Background", collector=True)

    def _foreground(self, ev: Event, uid: str) -> None:
        """An owner's foreground deletion, in the real collector's steps: its own pass (a GET;
        its finalizer removed at once if nothing blocks), then each dependent read, its owner
        read, and the dependent deleted; each dependent's delete event then brings another pass
        over the owner (`_check_foreground`)."""
        first = uid not in self.deleting_dependents
        self.deleting_dependents.add(uid)
        if first:
            self._check_foreground(uid)
        for key, obj in self._objects(self.dependents.get(uid, set())):
            if not obj["metadata"].get("deletionTimestamp"):
                # As the real collector: foreground again only for a dependent that has
                # dependents of its own, otherwise background (no finalizer to remove later).
                policy = (
                    "Foreground" if self.dependents.get(obj["metadata"]["uid"]) else "Background"
                )
                self._delete(key, obj, policy=policy, collector=True, owner=ev.key)

    def _check_foreground(self, uid: str) -> None:
        """A pass over an owner deleting its dependents: read live, and its finalizer removed
        once no dependent in the graph blocks it."""
        owner = self.store.by_uid(uid)
        if owner is None or FOREGROUND not in (owner["metadata"].get("finalizers") or []):
            return
        where = self.store.uids.get(uid)
        if where is not None:
            self._count("get", where[0], owner["metadata"].get("namespace", ""))
        blocking = [
            ref for ref in self.dependents.get(uid, set()) if uid in self.blocks.get(ref, ())
        ]
        if not blocking:
            self._drop_finalizer(owner, FOREGROUND)

    def _orphan(self, ev: Event, uid: str) -> None:
        for key, obj in self._objects(self.dependents.get(uid, set())):
            rt = self.registry.catalog.preferred(*key)
            if rt is None:
                continue
            new = copy.deepcopy(obj)
            refs = [o for o in new["metadata"].get("ownerReferences") or [] if o.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._count("patch", key, obj["metadata"].get("namespace", ""))
            self.registry.commit(rt, cur=obj, new=new)
        owner = self.store.by_uid(uid)
        if owner is not None:
            self._drop_finalizer(owner, ORPHAN)

    def _drop_finalizer(self, obj: Obj, finalizer: str) -> None:
        where = self.store.uids.get(obj["metadata"]["uid"])
        if where is None:
            return
        rt = self.registry.catalog.preferred(*where[0])
        if rt is None:
            return
        new = copy.deepcopy(obj)
        remaining = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if remaining:
            new["metadata"]["finalizers"] = remaining
        else:
            new["metadata"].pop("finalizers", None)
        self._count("get", where[0], obj["metadata"].get("namespace", ""))
        self._count("patch", where[0], obj["metadata"].get("namespace", ""))
        self.registry.commit(rt, cur=obj, new=new)

    def _sweep_namespace(self, name: str) -> None:
        """One pass of the namespace controller: delete what is left (RBAC first: the real
        controller's order is discovery's, so a Role may go before what it lets a controller
        clean up), report what remains in the namespace's conditions, and finalize it once
        nothing is left."""
        for key in sorted(self.store.buckets, key=lambda k: (k[0] != RBAC_GROUP, k)):
            if key == NAMESPACES:
                continue
            for (ns, _), obj in list(self.store.buckets[key].objects.items()):
                if ns == name and not obj["metadata"].get("deletionTimestamp"):
                    self._delete(key, obj, policy="Background")
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for (group, plural), bucket in self.store.buckets.items():
            if (group, plural) == NAMESPACES:
                continue
            for (ns, _), obj in bucket.objects.items():
                if ns != name:
                    continue
                # The real controller writes `<resource>.<group>`, a trailing dot for core kinds.
                resource = f"{plural}.{group}"
                remaining[resource] = remaining.get(resource, 0) + 1
                for finalizer in obj["metadata"].get("finalizers") or []:
                    finalizers[finalizer] = finalizers.get(finalizer, 0) + 1
        if not remaining:
            self.terminating.discard(name)
            self.registry.finalize_namespace(name)
            return
        self.registry.namespace_conditions(name, remaining_conditions(remaining, finalizers))


def remaining_conditions(remaining: dict[str, int], finalizers: dict[str, int]) -> list[Obj]:
    """The conditions kube-controller-manager's namespace controller writes on a namespace it
    cannot empty yet (their types, reasons and message formats are the real ones)."""
    content = ", ".join(f"{r} has {n} resource instances" for r, n in sorted(remaining.items()))
    held = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
    return [
        {
            "type": "NamespaceContentRemaining",
            "status": "True",
            "reason": "SomeResourcesRemain",
            "message": f"Some resources are remaining: {content}",
        },
        {
            "type": "NamespaceFinalizersRemaining",
            "status": "True" if finalizers else "False",
            "reason": "SomeFinalizersRemain" if finalizers else "ContentHasNoFinalizers",
            "message": f"Some content in the namespace has finalizers remaining: {held}"
            if finalizers
            else "All content-preserving finalizers finished",
        },
    ]


async def cancel(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
