"""The API server's whole load per job on a real control plane, counted from its audit log.

    python -m bench.realcp.load --kubeconfig ADMIN --node-kubeconfig NODE --audit-log FILE \\
        --runners N [--job-seconds 5] [--json OUT]

The workload of `bench.controller_scale --runners N --jobs --controller-process`, against a real
kube-apiserver and kube-controller-manager (its garbage collector included) instead of the
Kubernetes emulator: one EphemeralRunnerSet in a namespace of its own, the real `gha-controller`
process with its ServiceAccount's token and RBAC (manifests/controller-rbac.yaml and the runner
namespace component), the Actions emulator (`bench.emulators actions`), a stand-in kubelet
(`bench.realcp.kubelet`, as `system:node:<name>`) whose runner containers are the Actions
emulator's simulated runners, and kube-scheduler binding the pods. Phase 1: the set is patched
to N replicas with the listener's ServiceAccount (what the listener sends); until every runner
is `Pending` and ready with its pod `Running`, then quiet. Phase 2: N jobs are queued and held,
the real `gha-listener` process starts with its ServiceAccount, the jobs run `--job-seconds` from
its session; until every job is done and the set is at 0 with no runner and no pod left, then
quiet.

The API server must write an audit log (level Metadata for every request) to `--audit-log`:
each request is counted once (by audit ID), by identity (the users are mapped to roles: the
controller's and the listener's ServiceAccounts, kube-controller-manager's garbage collector
and its other controllers, the scheduler, the node), verb, resource and code. Requests on the
run's namespace are divided by N; the rest (leader leases, the apiserver's own, cluster-scoped
objects) are shown as totals. The bench's own polling (the admin kubeconfig's user) is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, config

from bench.controller_scale import (
    Child,
    free_port,
    listener_config,
    log_tail,
    read_line,
    spawned,
)
from sandbox.demo.cluster import (
    CONTROLLER_RBAC,
    CRDS,
    RUNNER_NAMESPACE_RBAC,
    github_secret,
    listener_rbac,
    runner_set,
)

SCALE_SET = "scale-runners"
CONTROLLER_NAMESPACE = "gha-runner-scaler-system"
GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"
KCM_SA_PREFIX = "system:serviceaccount:kube-system:"
QUIET = 3.0
"""Seconds with no request on the run's namespace (but the bench's) that end a phase."""
POLL = 0.5


def role(user: str, *, namespace: str, admin: str) -> str:
    """Who sent a request, by its audit log user."""
    if user == admin:
        return "bench"
    if user == f"system:serviceaccount:{CONTROLLER_NAMESPACE}:gha-controller":
        return "controller"
    if user == f"system:serviceaccount:{namespace}:gha-listener":
        return "listener"
    if user == GC_USER:
        return "gc"
    if user.startswith(KCM_SA_PREFIX):
        return "kcm:" + user.removeprefix(KCM_SA_PREFIX)
    if user == "system:kube-controller-manager":
        return "kcm"
    if user == "system:kube-scheduler":
        return "scheduler"
    if user.startswith("system:node:"):
        return "kubelet"
    if user == "system:apiserver":
        return "apiserver"
    return "other"


@dataclass
class Tally:
    """One phase's requests: `role verb resource code` on the run's namespace, and elsewhere."""

    namespaced: Counter[str] = field(default_factory=Counter)
    elsewhere: Counter[str] = field(default_factory=Counter)

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.namespaced + other.namespaced, self.elsewhere + other.elsewhere)


class AuditLog:
    """The audit log read from an offset: each request once, by its audit ID (a watch logs
    ResponseStarted and ResponseComplete)."""

    def __init__(self, path: Path, *, namespace: str, admin: str) -> None:
        self._path = path
        self._namespace = namespace
        self._admin = admin
        self._offset = path.stat().st_size if path.exists() else 0
        self._seen: set[str] = set()
        self.last_request = time.monotonic()
        """When a request other than the bench's on the run's namespace was last read."""

    def read(self) -> Tally:
        tally = Tally()
        with self._path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            if event["auditID"] in self._seen:
                continue
            self._seen.add(event["auditID"])
            who = role(event["user"]["username"], namespace=self._namespace, admin=self._admin)
            if who == "bench":
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", event["requestURI"].split("?")[0])
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            code = (event.get("responseStatus") or {}).get("code", 0)
            key = f"{who} {event['verb']} {resource} {code}"
            if ref.get("namespace") == self._namespace:
                tally.namespaced[key] += 1
                self.last_request = time.monotonic()
            else:
                tally.elsewhere[key] += 1
        return tally


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _apply(kubeconfig: Path, docs: list[dict[str, Any]]) -> None:
    _kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _token_kubeconfig(admin: Path, namespace: str, account: str, out: Path) -> None:
    """A kubeconfig for a ServiceAccount: the admin kubeconfig's cluster, a token of 2 hours."""
    token = _kubectl(admin, "-n", namespace, "create", "token", account, "--duration=2h").strip()
    cluster = yaml.safe_load(admin.read_text())["clusters"][0]
    out.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": account,
                        "context": {
                            "cluster": cluster["name"],
                            "user": account,
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": account,
            }
        )
    )
    out.chmod(0o600)


def setup(admin: Path, namespace: str, actions: dict[str, Any]) -> None:
    """The CRDs, the controller's RBAC, the run's namespace with the runner namespace component,
    the listener's RBAC, the GitHub Secret and the EphemeralRunnerSet at 0."""
    crds = [doc for path in sorted(CRDS.glob("*.yaml")) for doc in _yaml_docs(path)]
    _apply(admin, [doc for doc in crds if doc["kind"] == "CustomResourceDefinition"])
    _kubectl(admin, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    _apply(admin, [doc for path in CONTROLLER_RBAC for doc in _yaml_docs(path)])
    _apply(admin, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    rbac = _yaml_docs(RUNNER_NAMESPACE_RBAC)
    for doc in rbac:
        doc["metadata"]["namespace"] = namespace
    _apply(admin, rbac)
    _apply(admin, listener_rbac(namespace=namespace, name=SCALE_SET))
    _apply(admin, [github_secret(namespace=namespace, pat=actions["pat"])])
    _apply(
        admin,
        [
            runner_set(
                name=SCALE_SET,
                namespace=namespace,
                config_url=actions["config_url"],
                scale_set_id=actions["scale_sets"][SCALE_SET],
            )
        ],
    )


@dataclass
class Phase:
    name: str
    seconds: float
    tally: Tally
    controller_cpu: float


class Run:
    def __init__(
        self, *, api: client.ApiClient, http: aiohttp.ClientSession, audit: AuditLog,
        namespace: str, actions_admin: str, metrics_url: str, children: list[Child],
    ) -> None:  # fmt: skip
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.http = http
        self.audit = audit
        self.namespace = namespace
        self.actions_admin = actions_admin
        self.metrics_url = metrics_url
        self.children = children
        self.tally = Tally()

    def _read(self) -> None:
        self.tally = self.tally + self.audit.read()

    async def _runners(self) -> list[dict[str, Any]]:
        listed = await self.custom.list_namespaced_custom_object(
            "actions.github.com", "v1alpha1", self.namespace, "ephemeralrunners"
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    async def _pods(self) -> list[client.V1Pod]:
        pods: list[client.V1Pod] = (await self.core.list_namespaced_pod(self.namespace)).items
        return pods

    async def actions_state(self) -> dict[str, Any]:
        async with self.http.get(self.actions_admin + "/state") as reply:
            reply.raise_for_status()
            state: dict[str, Any] = await reply.json()
            return state

    async def all_ready(self, n: int) -> bool:
        runners = await self._runners()
        ready = sum(
            1
            for r in runners
            if (r.get("status") or {}).get("phase") == "Pending"
            and (r.get("status") or {}).get("ready") is True
        )
        running = sum(1 for p in await self._pods() if p.status.phase == "Running")
        return len(runners) == n and ready == n and running == n

    async def all_done(self) -> bool:
        state = await self.actions_state()
        if state["completed"] < state["jobs"]:
            return False
        ers = await self.custom.get_namespaced_custom_object(
            "actions.github.com", "v1alpha1", self.namespace, "ephemeralrunnersets", SCALE_SET
        )
        return (
            not ers["spec"].get("replicas") and not await self._runners() and not await self._pods()
        )

    async def controller_idle(self) -> bool:
        async with self.http.get(self.metrics_url) as reply:
            text = await reply.text()
        for line in text.splitlines():
            busy = line.startswith(("workqueue_depth", "controller_runtime_active_workers"))
            if busy and float(line.rsplit(" ", 1)[1]) != 0:
                return False
        return True

    async def until(self, condition: Any, *, within: float, what: str) -> float:
        started = time.monotonic()
        while not await condition():
            self._read()
            for child in self.children:
                if child.proc.returncode is not None:
                    raise RuntimeError(f"the {child.name} process exited: {log_tail(child.log)}")
            if time.monotonic() - started > within:
                raise TimeoutError(f"{what}: not reached within {within:.0f}s")
            await asyncio.sleep(POLL)
        return time.monotonic() - started

    async def quiet(self, *, within: float) -> None:
        """Until no request on the namespace came for QUIET seconds and the controller idles."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self._read()
            if time.monotonic() - self.audit.last_request >= QUIET and await self.controller_idle():
                return
            await asyncio.sleep(POLL)
        raise TimeoutError("the system did not quieten")

    def take(self) -> Tally:
        self._read()
        tally, self.tally = self.tally, Tally()
        return tally


def _cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def _controller(
    kubeconfig: Path, workdir: Path, namespace: str, http: aiohttp.ClientSession
) -> AsyncIterator[tuple[Child, str]]:
    metrics_port, health_port = free_port(), free_port()
    args = [
        sys.executable, "-m", "controller", f"--kubeconfig={kubeconfig}", "--no-leader-elect",
        f"--watch-namespace={namespace}", "--bind-address=127.0.0.1",
        f"--metrics-port={metrics_port}", f"--health-port={health_port}", "--log-level=warning",
    ]  # fmt: skip
    async with spawned("controller", args, workdir) as child:
        deadline = time.monotonic() + 60
        while True:
            if child.proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gha-controller did not start: {log_tail(child.log)}")
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"http://127.0.0.1:{health_port}/readyz") as reply:
                    if reply.status == 200:
                        break
            await asyncio.sleep(POLL)
        yield child, f"http://127.0.0.1:{metrics_port}/metrics"


async def run(
    *, admin: Path, node: Path, audit_log: Path, runners: int, job_seconds: float,
    within: float, workdir: Path,
) -> list[Phase]:  # fmt: skip
    namespace = f"load-{runners}-{int(time.time())}"
    admin_name = _kubectl(admin, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    phases: list[Phase] = []
    python = [sys.executable, "-m"]
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(60)) as http,
        spawned(
            "actions", [*python, "bench.emulators", "actions", f"--sets={SCALE_SET}"], workdir,
            first_line=True,
        ) as gh,
    ):  # fmt: skip
        actions = await read_line(gh.proc, gh.log, "the Actions emulator")
        setup(admin, namespace, actions)
        _token_kubeconfig(
            admin, CONTROLLER_NAMESPACE, "gha-controller", workdir / "controller.kubeconfig"
        )
        _token_kubeconfig(admin, namespace, "gha-listener", workdir / "listener.kubeconfig")
        kubelet_args = [
            *python, "bench.realcp.kubelet", f"--kubeconfig={node}",
            f"--actions-url={actions['url']}",
        ]  # fmt: skip
        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(admin), client_configuration=configuration)
        listener_configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(workdir / "listener.kubeconfig"),
            client_configuration=listener_configuration,
        )
        async with (
            spawned("kubelet", kubelet_args, workdir, first_line=True) as kubelet,
            _controller(workdir / "controller.kubeconfig", workdir, namespace, http) as (
                controller,
                metrics_url,
            ),
            client.ApiClient(configuration) as api,
            client.ApiClient(listener_configuration) as listener_api,
        ):
            assert kubelet.proc.stdout is not None
            if (await asyncio.wait_for(kubelet.proc.stdout.readline(), 60)).strip() != b"ready":
                raise RuntimeError(f"the kubelet did not start: {log_tail(kubelet.log)}")
            audit = AuditLog(audit_log, namespace=namespace, admin=admin_name)
            bench = Run(
                api=api, http=http, audit=audit, namespace=namespace,
                actions_admin=actions["admin"], metrics_url=metrics_url,
                children=[gh, kubelet, controller],
            )  # fmt: skip
            await bench.quiet(within=within)
            bench.take()
            cpu = _cpu(controller.proc.pid)
            started = time.monotonic()
            await client.CustomObjectsApi(listener_api).patch_namespaced_custom_object(
                "actions.github.com", "v1alpha1", namespace, "ephemeralrunnersets", SCALE_SET,
                {"spec": {"replicas": runners, "patchID": 1}},
                _content_type="application/merge-patch+json",
            )  # fmt: skip
            await bench.until(lambda: bench.all_ready(runners), within=within, what="all ready")
            await bench.quiet(within=within)
            now_cpu = _cpu(controller.proc.pid)
            phases.append(
                Phase("scale-up", time.monotonic() - started, bench.take(), now_cpu - cpu)
            )
            cpu = now_cpu
            started = time.monotonic()
            async with http.post(
                actions["admin"] + "/jobs", json={"count": runners, "label": SCALE_SET}
            ) as reply:
                reply.raise_for_status()
            config_path = listener_config(
                workdir, actions, scale_set_id=actions["scale_sets"][SCALE_SET], runners=runners
            )
            config_path.write_text(
                json.dumps(
                    {**json.loads(config_path.read_text()), "ephemeral_runner_set_namespace":
                     namespace}
                )
            )  # fmt: skip
            env = {
                "KUBECONFIG": str(workdir / "listener.kubeconfig"),
                "LISTENER_CONFIG_PATH": str(config_path),
            }
            async with spawned("listener", [*python, "listener"], workdir, env) as listener:
                bench.children.append(listener)

                async def session() -> bool:
                    state = await bench.actions_state()
                    made: bool = state["counts"].get("listener create_session", 0) > 0
                    return made

                await bench.until(session, within=within, what="the listener's session")
                async with http.post(
                    actions["admin"] + "/release", json={"duration": job_seconds}
                ) as reply:
                    reply.raise_for_status()
                await bench.until(bench.all_done, within=within, what="jobs done, set at 0")
                await bench.quiet(within=within)
                bench.children.remove(listener)
            phases.append(
                Phase(
                    "jobs",
                    time.monotonic() - started,
                    bench.take(),
                    _cpu(controller.proc.pid) - cpu,
                )
            )
            # While the controller runs: it removes its finalizers from the namespace's set and
            # RoleBinding.
            _kubectl(admin, "delete", "namespace", namespace, "--timeout=180s")
    return phases


def report(phases: list[Phase], runners: int) -> dict[str, Any]:
    total = Tally()
    for phase in phases:
        total = total + phase.tally
    by_role: Counter[str] = Counter()
    for key, n in total.namespaced.items():
        by_role[key.split()[0]] += n
    return {
        "runners": runners,
        "phases": [
            {
                "name": p.name,
                "seconds": round(p.seconds, 1),
                "controller_cpu_seconds": round(p.controller_cpu, 2),
                "per_runner": {
                    k: round(v / runners, 2) for k, v in sorted(p.tally.namespaced.items())
                },
                "elsewhere_total": dict(sorted(p.tally.elsewhere.items())),
            }
            for p in phases
        ],
        "lifecycle_per_runner": {
            k: round(v / runners, 2) for k, v in sorted(total.namespaced.items())
        },
        "lifecycle_per_runner_by_role": {
            k: round(v / runners, 2) for k, v in sorted(by_role.items())
        },
        "lifecycle_elsewhere_total": dict(sorted(total.elsewhere.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="an admin kubeconfig")
    parser.add_argument(
        "--node-kubeconfig", type=Path, required=True, help="system:node:worker-1's kubeconfig"
    )
    parser.add_argument("--audit-log", type=Path, required=True, help="the API server's")
    parser.add_argument("--runners", type=int, default=10)
    parser.add_argument("--job-seconds", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, seconds")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    parser.add_argument("--json", type=Path, help="write the report here too")
    args = parser.parse_args(argv)
    if not args.audit_log.exists():
        parser.error(f"{args.audit_log}: no such file (start kube-apiserver with --audit-log-path)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.logs or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        phases = asyncio.run(
            run(
                admin=args.kubeconfig, node=args.node_kubeconfig, audit_log=args.audit_log,
                runners=args.runners, job_seconds=args.job_seconds, within=args.timeout,
                workdir=workdir,
            )
        )  # fmt: skip
    result = report(phases, args.runners)
    text = json.dumps(result, indent=1)
    if args.json is not None:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
