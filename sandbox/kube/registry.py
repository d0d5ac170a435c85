"""The write path of the API server: strategies, validation, concurrency and deletion.

Every write, whether it comes over HTTP or from the simulated kubelet and controllers, goes
through this module so resourceVersions, generation, watch events and finalizer semantics stay
consistent (python-stack.md 2.3-2.10, 2.17, 2.19).
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
from sandbox.kube.resources import Catalog, ResourceType, crd_types
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.status import (
    STALE,
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    expired,
    forbidden,
    invalid,
    not_found,
    unsupported_media,
)
from sandbox.kube.store import Store

Obj = dict[str, Any]
Clock = Callable[[], dt.datetime]

# The request's fieldValidation mode and the warnings it collects; set per request by the
# HTTP layer (each aiohttp request runs in its own task, hence its own context).
FIELD_VALIDATION: contextvars.ContextVar[tuple[str, list[str]]] = contextvars.ContextVar(
    "field_validation", default=("Ignore", [])
)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
TERMINAL_PHASES = ("Succeeded", "Failed")


def timestamp(when: dt.datetime) -> str:
    """RFC 3339 at second precision with `Z`, as metav1.Time marshals."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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
        # Server-side apply: per object uid, per field manager, the leaf paths it applied.
        self.applied: dict[str, dict[str, set[tuple[str, ...]]]] = {}
        self.strict_namespaces = strict_namespaces
        self.garbage_collection = garbage_collection

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

    def create(self, rt: ResourceType, *, ns: str, body: Any, dry_run: bool = False) -> Obj:
        obj = self._check_body(rt, body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
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
                suffix = "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
                meta["name"] = f"{meta['generateName']}{suffix}"
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
        if dry_run:
            return self.render(rt, obj)
        stored = self.store.put(rt.key, obj, event="ADDED")
        self._after_write(rt, stored)
        return self.render(rt, stored)

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
        if nsobj["metadata"].get("deletionTimestamp") and rt.plural != "events":
            raise forbidden(
                rt.plural,
                group=rt.group,
                name=name,
                why=f"unable to create new content in namespace {ns} because it is being "
                "terminated",
            )

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if rt.group == "rbac.authorization.k8s.io":
            ok, msg = (
                "/" not in name and "%" not in name and name not in (".", ".."),
                ("may not contain '/' or '%'"),
            )
        elif rt.plural == "namespaces":
            ok, msg = bool(_DNS_LABEL.match(name)) and len(name) <= 63, _LABEL_MSG
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
        if rt.key == ("", "secrets"):
            _fold_string_data(obj)
            obj.setdefault("type", "Opaque")
        elif rt.key == ("", "namespaces"):
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
                "metadata"
            ]["name"]
        elif rt.key == ("", "pods"):
            _default_pod(obj)
        elif rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            obj["status"] = _crd_status(obj)

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
        return self.commit(rt, cur=cur, new=new, subresource=subresource, dry_run=dry_run), False

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
                created = self.create(rt, ns=ns, body=obj, dry_run=dry_run)
                if not dry_run:
                    self._record_apply(created, manager=field_manager, body=body)
                return created, True
            raise not_found(rt.plural, group=rt.group, name=name)
        base = self.render(rt, cur)
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
                    self._unapplied(cur, manager=field_manager, body=body), body
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
        result = self.commit(rt, cur=cur, new=patched, subresource=subresource, dry_run=dry_run)
        if content_type == patches.APPLY and not dry_run:
            self._record_apply(cur, manager=field_manager, body=body)
        return result, False

    def _unapplied(self, cur: Obj, *, manager: str, body: Obj) -> Obj:
        """The object without the fields `manager` applied last time and applies no more,
        unless another applier also set them (server-side apply's field ownership, without
        conflicts)."""
        owners = self.applied.get(cur["metadata"]["uid"], {})
        dropped = owners.get(manager, set()) - _leaf_paths(body)
        kept = set().union(*(p for m, p in owners.items() if m != manager))
        out = copy.deepcopy(cur)
        for path in sorted(dropped - kept, key=len, reverse=True):
            _remove_path(out, path)
        return out

    def _record_apply(self, obj: Obj, *, manager: str, body: Any) -> None:
        if isinstance(body, dict):
            owners = self.applied.setdefault(obj["metadata"]["uid"], {})
            owners[manager] = _leaf_paths(body)

    def commit(
        self,
        rt: ResourceType,
        *,
        cur: Obj,
        new: Obj,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        """The shared tail of PUT and PATCH: strategies, validation, no-op and deletion rules."""
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
        self._validate(rt, new)
        if _strip_for_noop(new) == _strip_for_noop(cur):
            return self.render(rt, cur)
        if dry_run:
            return self.render(rt, new)
        if (
            deleting
            and not meta.get("finalizers")
            and not cur_meta.get("deletionGracePeriodSeconds")
            and not _namespace_pending(rt, new)
        ):
            final = self.store.remove(rt.key, new)
            self._after_remove(rt, final)
            return self.render(rt, final)
        stored = self.store.put(rt.key, new, event="MODIFIED", old=cur)
        self._after_write(rt, stored)
        return self.render(rt, stored)

    def _prepare_update(self, rt: ResourceType, *, new: Obj, cur: Obj) -> None:
        if rt.key == ("", "secrets"):
            _fold_string_data(new)
            new.setdefault("type", cur.get("type", "Opaque"))
        elif rt.key == ("", "pods"):
            _default_pod(new)
            if _pod_spec_frozen(new.get("spec") or {}) != _pod_spec_frozen(cur.get("spec") or {}):
                raise invalid(
                    rt.kind,
                    group=rt.group,
                    name=cur["metadata"]["name"],
                    causes=[
                        Cause("FieldValueForbidden", field="spec", detail=POD_UPDATE_FORBIDDEN)
                    ],
                )
        elif rt.key == ("", "namespaces"):
            new.setdefault("spec", cur.get("spec", {}))
        elif rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            new["status"] = _crd_status(new)

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
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
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            causes.extend(_crd_causes(obj))
        if rt.schema is not None:
            dropped: list[str] = []
            pruned = schemas.prune_and_default(rt.schema, obj, dropped=dropped)
            self._field_validation(rt, dropped)
            obj.clear()
            obj.update(pruned)
            causes.extend(schemas.validate(rt.schema, obj))
        if causes:
            raise invalid(rt.kind, group=rt.group, name=meta.get("name", ""), causes=causes)

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
        if rt.key == ("", "namespaces"):
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
        if rt.key != ("", "pods"):
            return 0
        spec, status = cur.get("spec") or {}, cur.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in TERMINAL_PHASES:
            return 0
        grace = opts.get("gracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        current = cur["metadata"].get("deletionGracePeriodSeconds")
        if current is not None:
            grace = min(int(grace), int(current))
        return max(int(grace), 0)

    def _delete_namespace(self, rt: ResourceType, cur: Obj, *, dry_run: bool) -> tuple[int, Obj]:
        if cur["metadata"].get("deletionTimestamp") or dry_run:
            return 200, self.render(rt, cur)
        new = copy.deepcopy(cur)
        new["metadata"]["deletionTimestamp"] = timestamp(self.clock())
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {"phase": "Terminating"}
        stored = self.store.put(rt.key, new, event="MODIFIED", old=cur)
        return 200, self.render(rt, stored)

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step: drop spec.finalizers and remove it."""
        rt = self.catalog.preferred("", "namespaces")
        cur = self.store.get(("", "namespaces"), "", name)
        if rt is None or cur is None:
            return
        final = copy.deepcopy(cur)
        final["spec"]["finalizers"] = []
        if final["metadata"].get("finalizers"):
            self.store.put(rt.key, final, event="MODIFIED", old=cur)
            return
        self.store.remove(rt.key, final)

    # --- hooks -------------------------------------------------------------------------------

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.catalog.remove_crd(obj["metadata"]["name"])
            for t in crd_types(obj):
                self.catalog.add(t)

    def _after_remove(self, rt: ResourceType, obj: Obj) -> None:
        self.applied.pop(obj["metadata"]["uid"], None)
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            name = obj["metadata"]["name"]
            keys = {t.key for t in self.catalog.all() if t.crd == name}
            self.catalog.remove_crd(name)
            for key in keys:
                for item in list(self.store.items(key)):
                    self.store.remove(key, item)


_IDENTITY = {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")}


def _leaf_paths(body: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Paths to the non-object values of an apply body (lists are atomic, as for CRs)."""
    if not isinstance(body, dict) or not body:
        return {prefix} if prefix and prefix not in _IDENTITY else set()
    out: set[tuple[str, ...]] = set()
    for key, value in body.items():
        out |= _leaf_paths(value, (*prefix, str(key)))
    return out


def _remove_path(obj: Obj, path: tuple[str, ...]) -> None:
    cur: Any = obj
    for key in path[:-1]:
        cur = cur.get(key) if isinstance(cur, dict) else None
    if isinstance(cur, dict):
        cur.pop(path[-1], None)


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
    return rt.key == ("", "namespaces") and bool((obj.get("spec") or {}).get("finalizers"))


def _fold_string_data(obj: Obj) -> None:
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.setdefault("data", {}) or {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


def _default_pod(obj: Obj) -> None:
    """The defaults a real server fills into a Pod, so clients read back what they expect."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        spec.setdefault("serviceAccountName", spec.get("serviceAccount"))
    else:
        spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = spec["serviceAccountName"]
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(c, dict):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            image = str(c.get("image", ""))
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def _pod_spec_frozen(spec: Obj) -> Obj:
    """The part of a pod spec an update may not change (pod strategy ValidatePodUpdate)."""
    frozen = copy.deepcopy(spec)
    for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
        frozen.pop(key, None)
    for key in ("containers", "initContainers"):
        for container in frozen.get(key) or []:
            if isinstance(container, dict):
                container.pop("image", None)
    return frozen


def _qos_class(spec: Obj) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits")
        and all(k in r["limits"] for k in ("cpu", "memory"))
        and all(
            (r.get("requests") or r["limits"]).get(k) == r["limits"][k] for k in ("cpu", "memory")
        )
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _crd_status(crd: Obj) -> Obj:
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
    now = timestamp(utcnow())
    return {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": names,
        "storedVersions": storage,
    }


def _crd_causes(crd: Obj) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes = []
    for k in ("plural", "kind"):
        if not names.get(k):
            causes.append(Cause("FieldValueRequired", field=f"spec.names.{k}", detail=""))
    if not spec.get("group"):
        causes.append(Cause("FieldValueRequired", field="spec.group", detail=""))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            Cause(
                "FieldValueRequired",
                field="spec.versions",
                detail="must have exactly one version marked as storage version",
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            Cause(
                "FieldValueInvalid",
                field="spec.versions",
                detail="must have exactly one version marked as storage version",
            )
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "FieldValueNotSupported",
                field="spec.scope",
                detail=f'"{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
            )
        )
    name = crd["metadata"]["name"]
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        causes.append(
            Cause(
                "FieldValueInvalid",
                field="metadata.name",
                detail=f'"{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    return causes
