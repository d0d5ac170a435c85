"""What kube-controller-manager's garbage collector sends when a runner goes, in ARC's order and
in this project's, on a real control plane, counted from the API server's audit log.

    python -m bench.realcp.arc_order --kubeconfig ADMIN --audit-log FILE [--runners 20]

In a namespace of its own per order, with no controller watching it, the admin makes N
EphemeralRunners and, for each, a JIT Secret and an unscheduled pod owned by it (`controller`
and `blockOwnerDeletion` set, as both controllers set them). Then, for every runner:

- `arc`: ARC's order (its EphemeralRunner reconciler's deletion path): the runner (with a
  finalizer, as both controllers put one) deleted, its pod and Secret deleted by the controller,
  and once both are gone the finalizer removed;
- `ours`: this project's: the runner (with the finalizer) deleted in the background, the
  finalizer removed, the pod and Secret left to the garbage collector;
- `foreground`, `orphan`: the runner (no finalizer) deleted with that propagation policy, the
  rest left to the garbage collector.

After the collector has been quiet for a while, its requests on the namespace are counted (the
admin's own are left out) and printed per runner, by verb, resource and code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from bench.realcp.load import AuditLog, Tally, _kubectl, _yaml_docs
from sandbox.demo.cluster import CRDS

FINALIZER = "ephemeralrunner.actions.github.com/finalizer"
ORDERS = ("arc", "ours", "foreground", "orphan")
QUIET = 5.0


def runner(name: str, namespace: str, *, finalizer: bool) -> dict[str, Any]:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunner",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "finalizers": [FINALIZER] if finalizer else [],
        },
        "spec": {
            "githubConfigUrl": "https://github.com/example-org",
            "githubConfigSecret": "github-config",
            "runnerScaleSetId": 1,
            "spec": {"containers": [{"name": "runner", "image": "runner:latest"}]},
        },
    }


def owned(kind: str, name: str, namespace: str, owner: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": namespace,
        "ownerReferences": [
            {
                "apiVersion": "actions.github.com/v1alpha1",
                "kind": "EphemeralRunner",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if kind == "Secret":
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "nobody",
            "containers": [{"name": "runner", "image": "runner:latest"}],
        },
    }


async def _gone(read: Any, *args: str) -> None:
    while True:
        try:
            await read(*args)
        except client.ApiException as error:
            if error.status == 404:
                return
            raise
        await asyncio.sleep(0.1)


async def run(admin: Path, audit_log: Path, runners: int, order: str) -> Counter[str]:
    namespace = f"gc-{order}-{int(time.time())}"
    crds = [doc for path in sorted(CRDS.glob("*.yaml")) for doc in _yaml_docs(path)]
    names = [doc["metadata"]["name"] for doc in crds if doc["kind"] == "CustomResourceDefinition"]
    _kubectl(admin, "get", "crd", *names)
    admin_name = _kubectl(admin, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(admin), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core = client.CoreV1Api(api)
        custom = client.CustomObjectsApi(api)
        group = ("actions.github.com", "v1alpha1", namespace, "ephemeralrunners")
        await core.create_namespace({"metadata": {"name": namespace}})
        # Pods are refused until the ServiceAccount controller has made `default`.
        for _ in range(300):
            if (await core.list_namespaced_service_account(namespace)).items:
                break
            await asyncio.sleep(0.1)
        audit = AuditLog(audit_log, namespace=namespace, admin=admin_name)
        made = []
        for index in range(runners):
            owner = await custom.create_namespaced_custom_object(
                *group, runner(f"runner-{index}", namespace, finalizer=order in ("arc", "ours"))
            )
            await core.create_namespaced_secret(
                namespace, owned("Secret", f"runner-{index}", namespace, owner)
            )
            await core.create_namespaced_pod(
                namespace, owned("Pod", f"runner-{index}", namespace, owner)
            )
            made.append(owner["metadata"]["name"])
        await asyncio.sleep(QUIET)
        audit.read()  # the creations: not counted
        tally = Tally()
        unfinalize = [{"op": "remove", "path": "/metadata/finalizers"}]
        policy = {"foreground": "Foreground", "orphan": "Orphan"}.get(order, "Background")
        for name in made:
            await custom.delete_namespaced_custom_object(
                *group, name, body=client.V1DeleteOptions(propagation_policy=policy)
            )
            if order in ("foreground", "orphan"):
                continue
            if order == "arc":
                await core.delete_namespaced_pod(name, namespace)
                await core.delete_namespaced_secret(name, namespace)
                await _gone(core.read_namespaced_pod, name, namespace)
                await _gone(core.read_namespaced_secret, name, namespace)
            await custom.patch_namespaced_custom_object(
                *group, name, unfinalize, _content_type="application/json-patch+json"
            )
        deleted = time.monotonic()
        while time.monotonic() - max(deleted, audit.last_request) < QUIET:
            tally = tally + audit.read()
            await asyncio.sleep(0.5)
        tally = tally + audit.read()
        for name in made if order != "orphan" else []:
            await _gone(core.read_namespaced_pod, name, namespace)
            await _gone(core.read_namespaced_secret, name, namespace)
        await core.delete_namespace(namespace)
    return tally.namespaced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="an admin kubeconfig")
    parser.add_argument("--audit-log", type=Path, required=True, help="the API server's")
    parser.add_argument("--runners", type=int, default=20)
    args = parser.parse_args(argv)
    result = {}
    for order in ORDERS:
        counts = asyncio.run(run(args.kubeconfig, args.audit_log, args.runners, order))
        result[order] = {k: round(v / args.runners, 2) for k, v in sorted(counts.items())}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
