"""The generic write path of the API server: validation, concurrency, generation, status
subresources, patches and deletion, for every kind.

Every write, whether it comes over HTTP or from the simulated kubelet and controllers, goes
through this module so resourceVersions, generation, watch events and finalizer semantics stay
consistent (docs/sandbox-kube.md#writes). What differs per kind (pods, namespaces, secrets,
CRDs) is in `sandbox.kube.kinds`; server-side apply's removals in `sandbox.kube.apply`; the
field managers' record (`metadata.managedFields`) in `sandbox.kube.managed`.
"""

from __future__ import annotations

import base64
import contextvars
import copy
import datetime as dt
import json
import re
import secrets
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sandbox.kube import patch as patches
from sandbox.kube import schema as schemas
from sandbox.kube.admission import podsecurity, policies
from sandbox.kube.apply import AppliedFields, leaf_paths
from sandbox.kube.clock import Clock, timestamp, utcnow
from sandbox.kube.kinds import builtins, crds, namespaces, pods, services, subresources
from sandbox.kube.kinds import secrets as secret_kind
from sandbox.kube.managed import FIELD_MANAGER, ManagedFields, Path
from sandbox.kube.resources import Catalog, ResourceType
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.status import (
    STALE,
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    namespace_terminating,
    not_found,
    unsupported_media,
)
from sandbox.kube.store import Store

Obj = dict[str, Any]
Applied = tuple[str, set[Path]]
"""A server-side apply: its field manager and the leaf paths it applied."""

SECRETS = ("", "secrets")
NAMESPACES = ("", "namespaces")
Conditions = list[dict[str, Any]]
PODS = ("", "pods")
SERVICES = ("", "services")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")

# The request's fieldValidation mode and the warnings it collects; set per request by the
# HTTP layer (each aiohttp request runs in its own task, hence its own context).
FIELD_VALIDATION: contextvars.ContextVar[tuple[str, list[str]]] = contextvars.ContextVar(
    "field_validation", default=("Ignore", [])
)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# kube-apiserver draws a generated name again when it is taken, up to this many draws in all
# (RetryGenerateName, on by default since 1.31, GA in 1.32): with 27^5 suffixes, 5,000 objects
# of one generateName collide more often than not, which would otherwise be a 409 on create.
GENERATE_NAME_ATTEMPTS = 8


def random_suffix() -> str:
    return "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))


_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
FOREGROUND = "foregroundDeletion"
PARTIAL = ("scale", "approval", "finalize")
ORPHAN = "orphan"


def _strip_for_generation(obj: Obj, *, status_subresource: bool) -> Obj:
    """What a generation bump compares: all but metadata, and status when it is a subresource
    (without one, a status change is a change like any other)."""
    skip = ("metadata", "status") if status_subresource else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skip}


def _strip_for_noop(obj: Obj) -> Obj:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


class Registry:
    def __init__(
        self,
        *,
        store: Store,
        catalog: Catalog,
        clock: Clock = utcnow,
        strict_namespaces: bool = True,
        garbage_collection: bool = True,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.applied = AppliedFields()
        self.managed = ManagedFields()
        self.strict_namespaces = strict_namespaces
        self.garbage_collection = garbage_collection
        self.generate_suffix: Callable[[], str] = random_suffix
        """Draws a generateName suffix (tests replace it to make names collide)."""

    # --- reads -------------------------------------------------------------------------------

    def render(self, rt: ResourceType, obj: Obj) -> Obj:
        """The object as served in `rt`'s version: a shallow copy, since stored objects are
        never mutated in place (every write stores a new deep copy) and answers are serialized."""
        return {**obj, "apiVersion": rt.api_version, "kind": rt.kind}

    def get(self, rt: ResourceType, *, ns: str, name: str) -> Obj:
        obj = self.store.get(rt.key, ns, name)
        if obj is None:
            raise not_found(rt.plural, group=rt.group, name=name)
        return obj

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        *,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int = 0,
        continue_token: str = "",
    ) -> Obj:
        list_rv = self.store.rv
        after: tuple[str, str] | None = None
        if continue_token:
            list_rv, after = self._decode_continue(rt, continue_token)
        # Every page of a chunked list reports the revision of its first page.
        items = list(self.store.items(rt.key, ns))
        if after is not None:
            items = [o for o in items if _okey(o) > after]
        if labels or fields:
            items = [o for o in items if labels.matches(o) and fields.matches(o)]
        meta: Obj = {"resourceVersion": str(list_rv)}
        if limit and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            meta["continue"] = _encode_continue(list_rv, _okey(items[-1]))
            meta["remainingItemCount"] = remaining
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": meta,
            "items": [self.render(rt, o) for o in items],
        }

    def _decode_continue(self, rt: ResourceType, token: str) -> tuple[int, tuple[str, str]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode() + b"=="))
            rv, after = int(data["rv"]), (str(data["ns"]), str(data["name"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise bad_request(f"continue key is not valid: {exc}") from exc
        if rv < self.store.compacted(rt.key):
            raise expired(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results. "
                "Continuing with the provided token results in an inconsistent list - objects "
                "that were created, modified, or deleted between the time the first chunk was "
                "returned and now may show up in the list."
            )
        return rv, after

    # --- create ------------------------------------------------------------------------------

    def create(
        self,
        rt: ResourceType,
        *,
        ns: str,
        body: Any,
        dry_run: bool = False,
        applied: Applied | None = None,
    ) -> Obj:
        obj = self._check_body(rt, body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        # The server's own record: what a client sends there is ignored.
        meta.pop("managedFields", None)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", ns):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = ns
            self._check_namespace(rt, ns=ns, name=meta.get("name") or meta.get("generateName", ""))
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = self._generate_name(rt, ns=ns, prefix=str(meta["generateName"]))
            else:
                raise invalid(
                    rt.kind,
                    group=rt.group,
                    name="",
                    causes=[
                        Cause(
                            "FieldValueRequired",
                            field="metadata.name",
                            detail="name or generateName is required",
                        )
                    ],
                )
        self._validate_name(rt, meta["name"])
        existing = self.store.get(rt.key, ns if rt.namespaced else "", meta["name"])
        if existing is not None:
            raise already_exists(
                rt.plural,
                group=rt.group,
                name=meta["name"],
                deleting=bool(existing["metadata"].get("deletionTimestamp")),
            )
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp(self.clock())
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.status:
            obj.pop("status", None)
        self._prepare_create(rt, obj)
        self._validate(rt, obj)
        self._admit(rt, obj, None)
        self._admit_policies(rt, "CREATE", obj=obj, old=None, dry_run=dry_run)
        if dry_run:
            return self.render(rt, obj)
        manager, paths = applied if applied is not None else (FIELD_MANAGER.get(), None)
        self.managed.created(
            obj,
            manager=manager,
            api_version=rt.api_version,
            time=timestamp(self.clock()),
            applied=paths,
        )
        stored = self.store.put(rt.key, obj, event="ADDED")
        self._after_write(rt, stored)
        return self.render(rt, stored)

    def _generate_name(self, rt: ResourceType, *, ns: str, prefix: str) -> str:
        """A free name of `prefix` and a random suffix; after GENERATE_NAME_ATTEMPTS taken
        ones, the last (the create then answers 409 AlreadyExists, as the real server does)."""
        for _ in range(GENERATE_NAME_ATTEMPTS):
            name = f"{prefix}{self.generate_suffix()}"
            if self.store.get(rt.key, ns if rt.namespaced else "", name) is None:
                break
        return name

    def _check_body(self, rt: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        api_version = obj.get("apiVersion")
        if (
            api_version
            and api_version != rt.api_version
            and api_version not in (f"{rt.group}/{v}" for v in rt.versions)
        ):
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        if obj.get("kind") and obj["kind"] != rt.kind:
            raise bad_request(
                f"the kind in the data ({obj['kind']}) does not match the expected kind ({rt.kind})"
            )
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        return obj

    def _check_namespace(self, rt: ResourceType, *, ns: str, name: str) -> None:
        if not self.strict_namespaces:
            return
        nsobj = self.store.get(("", "namespaces"), "", ns)
        if nsobj is None:
            raise not_found("namespaces", group="", name=ns)
        if nsobj["metadata"].get("deletionTimestamp"):
            # The NamespaceLifecycle admission refuses every create, Events included.
            raise namespace_terminating(rt.plural, group=rt.group, name=name, namespace=ns)

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if rt.group == "rbac.authorization.k8s.io":
            ok, msg = (
                "/" not in name and "%" not in name and name not in (".", ".."),
                ("may not contain '/' or '%'"),
            )
        elif rt.plural == "namespaces":
            ok, msg = bool(pods.DNS_LABEL.match(name)) and len(name) <= 63, pods.LABEL_MSG
        else:
            ok, msg = bool(_DNS_SUBDOMAIN.match(name)) and len(name) <= 253, _SUBDOMAIN_MSG
        if not ok:
            raise invalid(
                rt.kind,
                group=rt.group,
                name=name,
                causes=[
                    Cause("FieldValueInvalid", field="metadata.name", detail=f'"{name}": {msg}')
                ],
            )

    def _prepare_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == SECRETS:
            secret_kind.prepare_create(obj)
        elif rt.key == NAMESPACES:
            namespaces.prepare_create(obj)
        elif rt.key == PODS:
            pods.prepare_create(obj)
        elif rt.key == SERVICES:
            services.prepare_create(obj, others=self.store.items(SERVICES))
        elif rt.key == CRDS:
            crds.prepare(obj)
        else:
            builtins.prepare_create(rt, obj)

    # --- update and patch --------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        *,
        ns: str,
        name: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """PUT. Returns the object and whether it was created (create-on-update types)."""
        if subresource == "scale":
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            new = copy.deepcopy(body)
        else:
            new = self._check_body(rt, body)
        meta = new.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", ns):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        cur = self.store.get(rt.key, ns, name)
        if cur is None:
            if rt.create_on_update and not subresource:
                meta["name"] = name
                meta.pop("resourceVersion", None)
                return self.create(rt, ns=ns, body=new, dry_run=dry_run), True
            raise not_found(rt.plural, group=rt.group, name=name)
        rv = meta.get("resourceVersion")
        if not rv:
            if not rt.unconditional_update:
                raise invalid(
                    rt.kind,
                    group=rt.group,
                    name=name,
                    causes=[
                        Cause(
                            "FieldValueInvalid",
                            field="metadata.resourceVersion",
                            detail="0x0: must be specified for an update",
                        )
                    ],
                )
        elif rv != cur["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, group=rt.group, name=name, why=STALE)
        if subresource in PARTIAL:
            return self._write_part(rt, cur, new, subresource, dry_run=dry_run), False
        return self.commit(rt, cur=cur, new=new, subresource=subresource, dry_run=dry_run), False

    def read_subresource(self, rt: ResourceType, *, ns: str, name: str, subresource: str) -> Obj:
        """GET of a subresource: the object itself, or its Scale."""
        obj = self.get(rt, ns=ns, name=name)
        return subresources.scale_of(obj) if subresource == "scale" else self.render(rt, obj)

    def _write_part(
        self, rt: ResourceType, cur: Obj, body: Any, subresource: str, *, dry_run: bool
    ) -> Obj:
        """A write to `scale`, `approval` or `finalize`: only that part of the object changes."""
        name = cur["metadata"]["name"]
        if subresource == "scale":
            causes = subresources.replicas_causes(body)
            if causes:
                raise invalid("Scale", group="autoscaling", name=name, causes=causes)
            new = subresources.with_scale(cur, body)
            result = self.commit(rt, cur=cur, new=new, dry_run=dry_run)
            return subresources.scale_of(result)
        new = subresources.with_part(cur, body, subresource)
        via = "status" if subresource == "approval" else ""
        return self.commit(rt, cur=cur, new=new, subresource=via, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        *,
        ns: str,
        name: str,
        content_type: str,
        body: Any,
        subresource: str = "",
        field_manager: str = "",
        force: bool | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        accepted = [patches.JSON_PATCH, patches.MERGE, patches.APPLY]
        if rt.strategic:
            accepted.insert(2, patches.STRATEGIC)
        if content_type not in accepted and content_type != patches.APPLY_CBOR:
            raise unsupported_media([*accepted, patches.APPLY_CBOR])
        if content_type == patches.APPLY and not field_manager:
            raise _patch_options_invalid(
                "fieldManager", reason="FieldValueRequired", detail="is required for apply patch"
            )
        if force is not None and content_type != patches.APPLY:
            raise _patch_options_invalid(
                "force",
                reason="FieldValueForbidden",
                detail="may not be specified for non-apply patch",
            )
        cur = self.store.get(rt.key, ns, name)
        if cur is None:
            if content_type == patches.APPLY and not subresource:
                obj = copy.deepcopy(body) if isinstance(body, dict) else body
                if isinstance(obj, dict):
                    obj.setdefault("metadata", {})["name"] = name
                created = self.create(
                    rt,
                    ns=ns,
                    body=obj,
                    dry_run=dry_run,
                    applied=(field_manager, leaf_paths(body)),
                )
                if not dry_run:
                    self.applied.record(created, manager=field_manager, body=body)
                return created, True
            raise not_found(rt.plural, group=rt.group, name=name)
        base = subresources.scale_of(cur) if subresource == "scale" else self.render(rt, cur)
        try:
            if content_type == patches.JSON_PATCH:
                patched = patches.json_patch(base, body)
            elif content_type == patches.MERGE:
                patched = patches.merge_patch(base, body)
            elif content_type == patches.STRATEGIC:
                patched = patches.strategic_merge_patch(base, body)
            else:
                if not isinstance(body, dict):
                    raise bad_request("apply patch body must be an object")
                patched = patches.merge_patch(
                    self.applied.unapplied(cur, manager=field_manager, body=body), body
                )
        except patches.PatchFailed as exc:
            raise ApiError(422, "Invalid", message=str(exc)) from exc
        if not isinstance(patched, dict):
            raise bad_request("the patched object is not a JSON object")
        patched_meta = patched.get("metadata")
        if not isinstance(patched_meta, dict):
            raise bad_request("metadata must be an object")
        rv = patched_meta.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, group=rt.group, name=name, why=STALE)
        if subresource in PARTIAL:
            return self._write_part(rt, cur, patched, subresource, dry_run=dry_run), False
        result = self.commit(
            rt,
            cur=cur,
            new=patched,
            subresource=subresource,
            dry_run=dry_run,
            applied=(field_manager, leaf_paths(body)) if content_type == patches.APPLY else None,
        )
        if content_type == patches.APPLY and not dry_run:
            self.applied.record(cur, manager=field_manager, body=body)
        return result, False

    def commit(
        self,
        rt: ResourceType,
        *,
        cur: Obj,
        new: Obj,
        subresource: str = "",
        dry_run: bool = False,
        applied: Applied | None = None,
    ) -> Obj:
        """The shared tail of PUT and PATCH: strategies, validation, no-op and deletion rules,
        and the field managers' record (`sandbox.kube.managed`)."""
        cur_meta = cur["metadata"]
        name = cur_meta["name"]
        new = self._check_body(rt, new)
        if subresource == "status":
            result = copy.deepcopy(cur)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            if not rt.crd:
                meta = new.get("metadata") or {}
                for k in ("labels", "annotations"):
                    if k in meta:
                        result["metadata"][k] = meta[k]
                    else:
                        result["metadata"].pop(k, None)
            new = result
        else:
            if rt.status:
                if "status" in cur:
                    new["status"] = copy.deepcopy(cur["status"])
                else:
                    new.pop("status", None)
        meta = new.setdefault("metadata", {})
        if rt.namespaced and meta.get("namespace") not in (None, "", cur_meta.get("namespace")):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if meta.get("name") not in (None, "", name):
            raise bad_request(f"the name of the object ({meta['name']}) does not match ({name})")
        for k in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ):
            if k in cur_meta:
                meta[k] = cur_meta[k]
            else:
                meta.pop(k, None)
        if subresource != "status":
            self._prepare_update(rt, new=new, cur=cur)
        deleting = bool(cur_meta.get("deletionTimestamp"))
        if deleting:
            added = [
                f
                for f in meta.get("finalizers") or []
                if f not in (cur_meta.get("finalizers") or [])
            ]
            if added:
                raise invalid(
                    rt.kind,
                    group=rt.group,
                    name=name,
                    causes=[
                        Cause(
                            "FieldValueForbidden",
                            field="metadata.finalizers",
                            detail="no new finalizers can be added if the object is being deleted, "
                            "found new finalizers []string{"
                            + ", ".join(json.dumps(f) for f in added)
                            + "}",
                        )
                    ],
                )
        if rt.generation and _strip_for_generation(
            new, status_subresource=rt.status
        ) != _strip_for_generation(cur, status_subresource=rt.status):
            meta["generation"] = int(cur_meta.get("generation") or 0) + 1
        self._validate(rt, new, old=cur)
        if not subresource:
            self._admit(rt, new, cur)
        self._admit_policies(
            rt, "UPDATE", obj=new, old=cur, subresource=subresource, dry_run=dry_run
        )
        if _strip_for_noop(new) == _strip_for_noop(cur):
            return self.render(rt, cur)
        if dry_run:
            return self.render(rt, new)
        manager, paths = applied if applied is not None else (FIELD_MANAGER.get(), None)
        self.managed.updated(
            cur,
            new,
            manager=manager,
            subresource=subresource,
            api_version=rt.api_version,
            time=timestamp(self.clock()),
            applied=paths,
        )
        if (
            deleting
            and not meta.get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")
            and not _namespace_pending(rt, new)
        ):
            # The update is not written: the stored object is deleted, so the DELETED event
            # carries its last stored state, finalizers included (etcd's previous value), as
            # on a real server; the answer is the update's object at the deletion's version.
            final = self.store.remove(rt.key, cur)
            self._after_remove(rt, final)
            answer = copy.deepcopy(new)
            answer["metadata"]["resourceVersion"] = final["metadata"]["resourceVersion"]
            return self.render(rt, answer)
        stored = self.store.put(rt.key, new, event="MODIFIED", old=cur)
        self._after_write(rt, stored)
        return self.render(rt, stored)

    def _prepare_update(self, rt: ResourceType, *, new: Obj, cur: Obj) -> None:
        if rt.key == SECRETS:
            secret_kind.prepare_update(new, cur)
        elif rt.key == PODS:
            pods.prepare_update(rt, new=new, cur=cur)
        elif rt.key == SERVICES:
            services.prepare_update(new, cur, others=self.store.items(SERVICES))
        elif rt.key == NAMESPACES:
            namespaces.prepare_update(new, cur)
        elif rt.key == CRDS:
            crds.prepare(new)
        else:
            builtins.prepare_update(rt, new=new, cur=cur)

    def _admit_policies(
        self,
        rt: ResourceType,
        operation: str,
        *,
        obj: Obj | None,
        old: Obj | None,
        subresource: str = "",
        dry_run: bool,
    ) -> None:
        """Validating admission policies, after the object's own validation, for a client's
        request (sandbox.kube.admission.policies); their warnings join the request's."""
        user = policies.REQUEST_USER.get()
        if user is None:
            return
        meta = (obj or old or {}).get("metadata") or {}
        outcome = policies.admit(
            self.store,
            policies.Request(
                rt=rt,
                operation=operation,
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                obj=obj,
                old=old,
                user=user,
                subresource=subresource,
                dry_run=dry_run,
            ),
        )
        request = FIELD_VALIDATION.get(None)
        if request is not None:
            request[1].extend(outcome.warnings)

    def _validate(self, rt: ResourceType, obj: Obj, *, old: Obj | None = None) -> None:
        causes: list[Cause] = []
        meta = obj["metadata"]
        for i, ref in enumerate(meta.get("ownerReferences") or []):
            for k in ("apiVersion", "kind", "name", "uid"):
                if not (isinstance(ref, dict) and ref.get(k)):
                    causes.append(
                        Cause(
                            "FieldValueRequired",
                            field=f"metadata.ownerReferences[{i}].{k}",
                            detail="",
                        )
                    )
        for k in ("labels", "annotations"):
            values = meta.get(k) or {}
            if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
                causes.append(
                    Cause(
                        "FieldValueInvalid", field=f"metadata.{k}", detail="values must be strings"
                    )
                )
        if rt.key == CRDS:
            causes.extend(crds.causes(obj))
        elif rt.key == PODS:
            causes.extend(pods.causes(obj.get("spec") or {}))
        elif not rt.crd:
            causes.extend(builtins.causes(rt, obj))
        if rt.schema is not None:
            dropped: list[str] = []
            pruned = schemas.prune_and_default(rt.schema, obj, dropped=dropped)
            self._field_validation(rt, dropped)
            obj.clear()
            obj.update(pruned)
            causes.extend(schemas.validate(rt.schema, obj, old=old))
        if causes:
            raise invalid(rt.kind, group=rt.group, name=meta.get("name", ""), causes=causes)

    def _admit(self, rt: ResourceType, obj: Obj, cur: Obj | None) -> None:
        """The validating admission plugins, after validation as on a real server: PodSecurity
        (its warnings reach only a request's answer: none without one)."""
        ns = obj["metadata"].get("namespace", "") if rt.namespaced else ""
        request = FIELD_VALIDATION.get(None)
        podsecurity.admit(
            rt.key,
            obj,
            cur,
            namespace=self.store.get(NAMESPACES, "", ns) if ns else None,
            warnings=request[1] if request is not None else None,
        )

    def _field_validation(self, rt: ResourceType, unknown: Sequence[str]) -> None:
        """fieldValidation=Strict rejects unknown fields; Warn reports them (kubectl's default
        `--validate=strict` sends Strict)."""
        mode, warnings = FIELD_VALIDATION.get()
        if not unknown or mode == "Ignore":
            return
        if mode == "Strict":
            detail = ", ".join(f'unknown field "{p}"' for p in unknown)
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {detail}"
            )
        warnings.extend(f'unknown field "{p}"' for p in unknown)

    # --- delete ------------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        *,
        ns: str,
        name: str,
        options: Obj | None = None,
        dry_run: bool = False,
    ) -> tuple[int, Obj]:
        """DELETE. Returns the HTTP code and the body (the object, or a Success Status)."""
        opts = options or {}
        cur = self.get(rt, ns=ns, name=name)
        meta = cur["metadata"]
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise conflict(
                rt.plural,
                group=rt.group,
                name=name,
                why=f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise conflict(
                rt.plural,
                group=rt.group,
                name=name,
                why="Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
            )
        self._admit_policies(rt, "DELETE", obj=None, old=cur, dry_run=dry_run)
        policy = opts.get("propagationPolicy")
        if policy is None and opts.get("orphanDependents") is not None:
            policy = "Orphan" if opts["orphanDependents"] else "Background"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise invalid(
                "DeleteOptions",
                group="meta.k8s.io",
                name="",
                causes=[
                    Cause(
                        "FieldValueNotSupported",
                        field="propagationPolicy",
                        detail=f'"{policy}": supported values: "Foreground", "Background", '
                        '"Orphan", "nil"',
                    )
                ],
            )
        new = copy.deepcopy(cur)
        nmeta = new["metadata"]
        finalizers: list[str] = list(nmeta.get("finalizers") or [])
        if self.garbage_collection:
            if policy == "Foreground" and FOREGROUND not in finalizers:
                finalizers = [f for f in finalizers if f != ORPHAN] + [FOREGROUND]
            elif policy == "Orphan" and ORPHAN not in finalizers:
                finalizers = [f for f in finalizers if f != FOREGROUND] + [ORPHAN]
        if finalizers:
            nmeta["finalizers"] = finalizers
        grace = self._grace(rt, cur, opts=opts)
        if rt.key == NAMESPACES:
            return self._delete_namespace(rt, cur, dry_run=dry_run)
        if grace or finalizers:
            when = self.clock() + dt.timedelta(seconds=grace)
            if not nmeta.get("deletionTimestamp"):
                nmeta["deletionTimestamp"] = timestamp(when)
                nmeta["deletionGracePeriodSeconds"] = grace
                if rt.generation:
                    nmeta["generation"] = int(nmeta.get("generation") or 0) + 1
            elif grace < int(nmeta.get("deletionGracePeriodSeconds") or 0):
                nmeta["deletionTimestamp"] = timestamp(when)
                nmeta["deletionGracePeriodSeconds"] = grace
            if grace == 0 and not finalizers:
                return self._remove(rt, new, dry_run=dry_run)
            if new == cur or dry_run:
                return 200, self.render(rt, new)
            stored = self.store.put(rt.key, new, event="MODIFIED", old=cur)
            self._after_write(rt, stored)
            code = 202 if opts.get("orphanDependents") is False else 200
            return code, self.render(rt, stored)
        return self._remove(rt, new, dry_run=dry_run)

    def _remove(self, rt: ResourceType, obj: Obj, *, dry_run: bool) -> tuple[int, Obj]:
        final = obj if dry_run else self.store.remove(rt.key, obj)
        if not dry_run:
            self._after_remove(rt, final)
        if rt.return_deleted:
            return 200, self.render(rt, final)
        details: Obj = {"name": final["metadata"]["name"]}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = final["metadata"]["uid"]
        return 200, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def _grace(self, rt: ResourceType, cur: Obj, *, opts: Obj) -> int:
        """Pods on a node with a live phase terminate gracefully; everything else at once."""
        if rt.key != PODS:
            return 0
        return pods.grace(cur, opts=opts)

    def _delete_namespace(self, rt: ResourceType, cur: Obj, *, dry_run: bool) -> tuple[int, Obj]:
        if cur["metadata"].get("deletionTimestamp") or dry_run:
            return 200, self.render(rt, cur)
        new = namespaces.terminating(cur, now=timestamp(self.clock()))
        stored = self.store.put(rt.key, new, event="MODIFIED", old=cur)
        return 200, self.render(rt, stored)

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step: drop spec.finalizers and remove it."""
        rt = self.catalog.preferred(*NAMESPACES)
        cur = self.store.get(NAMESPACES, "", name)
        if rt is None or cur is None:
            return
        final = namespaces.finalized(cur)
        if final["metadata"].get("finalizers"):
            self.store.put(rt.key, final, event="MODIFIED", old=cur)
            return
        self.store.remove(rt.key, final)

    def namespace_conditions(self, name: str, conditions: Conditions) -> None:
        """The namespace controller's report on a namespace it cannot empty yet: its status
        conditions, written only when they change (lastTransitionTime kept while a condition's
        status stays)."""
        rt = self.catalog.preferred(*NAMESPACES)
        cur = self.store.get(NAMESPACES, "", name)
        if rt is None or cur is None:
            return
        before = {c["type"]: c for c in (cur.get("status") or {}).get("conditions") or []}
        now = timestamp(self.clock())
        stamped = [
            {
                **c,
                "lastTransitionTime": before[c["type"]]["lastTransitionTime"]
                if c["type"] in before and before[c["type"]]["status"] == c["status"]
                else now,
            }
            for c in conditions
        ]
        if [before.get(c["type"]) for c in stamped] == stamped:
            return
        new = copy.deepcopy(cur)
        new["status"]["conditions"] = stamped
        self.store.put(rt.key, new, event="MODIFIED", old=cur)

    # --- hooks -------------------------------------------------------------------------------

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == CRDS:
            crds.after_write(self.catalog, obj)

    def _after_remove(self, rt: ResourceType, obj: Obj) -> None:
        self.applied.forget(obj["metadata"]["uid"])
        self.managed.forget(obj["metadata"]["uid"])
        if rt.key == CRDS:
            crds.after_remove(self.catalog, self.store, obj)


def _okey(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _encode_continue(rv: int, after: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "ns": after[0], "name": after[1]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _patch_options_invalid(field: str, *, reason: str, detail: str) -> ApiError:
    return invalid(
        "PatchOptions",
        group="meta.k8s.io",
        name="",
        causes=[Cause(reason, field=field, detail=detail)],
    )


def _namespace_pending(rt: ResourceType, obj: Obj) -> bool:
    return rt.key == NAMESPACES and namespaces.pending(obj)
