"""bench/realcp/load.py's reading of kube-apiserver's audit log (the control plane it measures is
built by hand, outside CI: bench/realcp/README.md): each request once, by identity, the
run's namespace apart from the rest, the bench's own requests left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.realcp.load import AuditLog, role

NAMESPACE = "load-3-1"
CONTROLLER = "system:serviceaccount:gha-runner-scaler-system:gha-controller"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"


def event(
    audit_id: str, user: str, verb: str, resource: str, *, stage: str = "ResponseComplete",
    namespace: str | None = NAMESPACE, subresource: str | None = None, code: int = 200,
) -> dict[str, Any]:  # fmt: skip
    ref: dict[str, Any] = {"resource": resource}
    if namespace is not None:
        ref["namespace"] = namespace
    if subresource is not None:
        ref["subresource"] = subresource
    return {
        "auditID": audit_id,
        "stage": stage,
        "user": {"username": user},
        "verb": verb,
        "requestURI": f"/api/v1/{resource}",
        "objectRef": ref,
        "responseStatus": {"code": code},
    }


def write(path: Path, events: list[dict[str, Any]], tail: str = "") -> None:
    with path.open("a") as log:
        log.write("".join(json.dumps(e) + "\n" for e in events) + tail)


def test_roles() -> None:
    users = {
        CONTROLLER: "controller",
        f"system:serviceaccount:{NAMESPACE}:gha-listener": "listener",
        "system:serviceaccount:other:gha-listener": "other",
        GC: "gc",
        "system:serviceaccount:kube-system:disruption-controller": "kcm:disruption-controller",
        "system:node:worker-1": "kubelet",
        "system:kube-scheduler": "scheduler",
        "admin": "bench",
    }
    assert {user: role(user, namespace=NAMESPACE, admin="admin") for user in users} == users


def test_each_request_once_from_where_it_started(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write(log, [event("before", CONTROLLER, "create", "pods")])
    audit = AuditLog(log, namespace=NAMESPACE, admin="admin")
    write(
        log,
        [
            event("w", CONTROLLER, "watch", "pods", stage="ResponseStarted"),
            event("a", GC, "get", "pods"),
            event("b", GC, "delete", "pods"),
            event("c", "admin", "list", "pods"),
            event("d", "system:node:worker-1", "patch", "pods", subresource="status"),
            event("e", CONTROLLER, "create", "selfsubjectaccessreviews", namespace=None),
            event("f", GC, "get", "secrets", namespace="elsewhere", code=404),
        ],
        # A line the API server is still writing: read with the next call.
        tail=json.dumps(event("g", GC, "delete", "secrets"))[:20],
    )
    first = audit.read()
    assert first.namespaced == {
        "controller watch pods 200": 1,
        "gc get pods 200": 1,
        "gc delete pods 200": 1,
        "kubelet patch pods/status 200": 1,
    }
    assert first.elsewhere == {
        "controller create selfsubjectaccessreviews 200": 1,
        "gc get secrets 404": 1,
    }
    with log.open("a") as rest:
        rest.write(json.dumps(event("g", GC, "delete", "secrets"))[20:] + "\n")
    write(log, [event("w", CONTROLLER, "watch", "pods")])
    second = audit.read()
    assert second.namespaced == {"gc delete secrets 200": 1}
    assert not second.elsewhere
