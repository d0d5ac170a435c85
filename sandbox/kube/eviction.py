"""The pods/eviction subresource (policy/v1 Eviction), as kube-apiserver's eviction REST
storage answers it (docs/sandbox-kube.md#eviction).

0. In a namespace being deleted, 403 (the NamespaceLifecycle admission, cause
   `NamespaceTerminating`), which kubectl drain retries.
1. A pod that may ignore budgets (phase Succeeded, Failed or Pending, or already terminating) is
   deleted straight away (a live Pending pod with a resourceVersion precondition).
2. Otherwise the budgets of its namespace whose selector picks it: more than one is a 500; none
   lets the eviction through.
3. A pod that is not Ready passes without using the budget when the budget says
   `unhealthyPodEvictionPolicy: AlwaysAllow`, or (IfHealthyBudget, the default) when it has
   `currentHealthy >= desiredHealthy > 0`.
4. Else the budget decides: a status not yet observed for its generation is 429 (retry after
   10 s), `disruptionsAllowed: 0` is 429 with the real message and cause; otherwise one
   disruption is used (`disruptionsAllowed` - 1, the pod in `disruptedPods`) through the
   budget's `/status`.
5. The pod gets the condition DisruptionTarget (EvictionByEvictionAPI) and is deleted with the
   Eviction's deleteOptions; the answer is 201 with a Success Status.
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.kube import disruption
from sandbox.kube.admission.policies import REQUEST_USER
from sandbox.kube.clock import timestamp
from sandbox.kube.kinds.pods import TERMINAL_PHASES
from sandbox.kube.kubelet.podstatus import set_condition
from sandbox.kube.registry import Registry
from sandbox.kube.resources import ResourceType
from sandbox.kube.status import ApiError, bad_request, conflict, namespace_terminating

Obj = dict[str, Any]

PDBS = disruption.PDBS
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
SUCCESS: Obj = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success",
    "code": 201,
}


def budget_refusal(name: str, message: str, *, retry_after: int = 0) -> ApiError:
    """errors.NewTooManyRequests with a DisruptionBudget cause; `Retry-After` only when the
    suggested delay is not 0, as the server writes it."""
    details: Obj = {"causes": [{"reason": "DisruptionBudget", "message": message}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", message=VIOLATION, details=details, headers=headers)


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _can_ignore_budgets(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in (*TERMINAL_PHASES, "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _options(body: Obj, *, dry_run: bool) -> Obj:
    options = body.get("deleteOptions")
    options = copy.deepcopy(options) if isinstance(options, dict) else {}
    listed = options.get("dryRun") or []
    if dry_run and listed and listed != ["All"]:
        raise ApiError(
            500,
            "InternalError",
            message="Internal error occurred: Non-matching dry-run options in request and "
            f"content: [All] and {listed}",
        )
    return options


def evict(
    registry: Registry, pods: ResourceType, *, ns: str, name: str, body: Any, dry_run: bool
) -> Obj:
    """POST pods/NAME/eviction; returns the Success Status or raises the refusal."""
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise bad_request(f"not a Eviction object: {type(body).__name__}")
    if (body.get("metadata") or {}).get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    options = _options(body, dry_run=dry_run)
    dry_run = dry_run or "All" in (options.get("dryRun") or [])
    namespace = registry.store.get(("", "namespaces"), "", ns)
    if namespace is not None and namespace["metadata"].get("deletionTimestamp"):
        # The NamespaceLifecycle admission refuses every create there, an Eviction included.
        raise namespace_terminating("pods", group="", name=name, namespace=ns)
    pod = registry.get(pods, ns=ns, name=name)
    if _can_ignore_budgets(pod):
        _delete(registry, pods, pod, options, dry_run=dry_run)
        return SUCCESS
    budgets = disruption.matching(registry.store.items(PDBS, ns), pod)
    if len(budgets) > 1:
        raise ApiError(500, "", message=MORE_THAN_ONE)
    if budgets:
        _use_budget(registry, budgets[0], pod, dry_run=dry_run)
    _delete(registry, pods, pod, options, dry_run=dry_run)
    return SUCCESS


def _use_budget(registry: Registry, pdb: Obj, pod: Obj, *, dry_run: bool) -> None:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    name = pdb["metadata"]["name"]
    if not _ready(pod):
        if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return
        desired = int(status.get("desiredHealthy") or 0)
        if int(status.get("currentHealthy") or 0) >= desired > 0:
            return
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise budget_refusal(
            name,
            f"The disruption budget {name} is still being processed by the server.",
            retry_after=10,
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed == 0:
        raise budget_refusal(
            name,
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
            f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently",
        )
    if dry_run:
        return
    rt = registry.catalog.preferred(*PDBS)
    assert rt is not None
    new = copy.deepcopy(pdb)
    new_status = new.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    now = timestamp(registry.clock())
    if allowed - 1 == 0:
        disruption.disruption_condition(new_status, now=now)
    new_status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now
    registry.commit(rt, cur=pdb, new=new, subresource="status")


def _delete(
    registry: Registry, pods: ResourceType, pod: Obj, options: Obj, *, dry_run: bool
) -> None:
    """addConditionAndDeletePod: check the caller's preconditions against the pod, mark it
    DisruptionTarget, then delete it with the caller's options (the server's own writes: no
    admission of their own, the eviction request was admitted)."""
    meta = pod["metadata"]
    name, ns = meta["name"], meta["namespace"]
    pre = options.get("preconditions") or {}
    if pre.get("uid") and pre["uid"] != meta["uid"]:
        raise conflict(
            pods.plural,
            group="",
            name=name,
            why=f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
            f"{meta['uid']}",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        raise conflict(
            pods.plural,
            group="",
            name=name,
            why="Precondition failed: ResourceVersion in precondition: "
            f"{pre['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}",
        )
    token = REQUEST_USER.set(None)
    try:
        if not dry_run:
            new = copy.deepcopy(pod)
            set_condition(
                new.setdefault("status", {}),
                "DisruptionTarget",
                value="True",
                now=timestamp(registry.clock()),
                reason="EvictionByEvictionAPI",
                message="Eviction API: evicting",
            )
            registry.commit(pods, cur=pod, new=new, subresource="status")
        delete_options = {k: v for k, v in options.items() if k not in ("preconditions", "dryRun")}
        delete_options["preconditions"] = {"uid": meta["uid"]}
        registry.delete(pods, ns=ns, name=name, options=delete_options, dry_run=dry_run)
    finally:
        REQUEST_USER.reset(token)
