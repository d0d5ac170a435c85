"""KubeEmulator: the API server, kubelet and controller-manager simulation on one aiohttp site."""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from sandbox import MANIFESTS
from sandbox.kube import bootstrap
from sandbox.kube.clock import Clock, utcnow
from sandbox.kube.disruption import DisruptionController
from sandbox.kube.faults import Faults, Requests
from sandbox.kube.gc import Controllers, cancel
from sandbox.kube.kubelet.lifecycle import Kubelet
from sandbox.kube.kubelet.node import MAX_NODES, node_names
from sandbox.kube.kubelet.process import PROJECT_IMAGE, ClusterAccess, ProcessRuntime
from sandbox.kube.kubelet.runtime import ContainerRuntime, RunUntilDeleted
from sandbox.kube.nodelifecycle import NodeLifecycle
from sandbox.kube.rbac import (
    CLUSTER_ADMINS,
    MASTERS,
    Authorizer,
    Tokens,
    User,
    service_account_user,
)
from sandbox.kube.registry import Registry
from sandbox.kube.resources import BUILTINS, SEEDED_NAMESPACES, Catalog
from sandbox.kube.server.apiserver import ApiServer
from sandbox.kube.status import ApiError
from sandbox.kube.store import Store
from sandbox.kube.tokencontroller import TokenController
from sandbox.kube.workloads import Workloads
from sandbox.tls import generate as generate_certificate

if TYPE_CHECKING:
    from kubernetes_asyncio import client

Obj = dict[str, Any]
ADMIN_USER = "kubernetes-admin"
# The admin's groups, as in a kind/kubeadm admin kubeconfig's client certificate.
ADMIN_GROUPS = (MASTERS, CLUSTER_ADMINS)


PROJECT_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = MANIFESTS / "crds"


def project_crds() -> list[Path]:
    """The project's CRD files (manifests/crds/*.yaml, packaged with the sandbox)."""
    return sorted(CRD_DIR.glob("*.yaml"))


_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _load_yaml_cached(path: Path, mtime: float) -> list[Any]:
    return list(yaml.load_all(path.read_text(), Loader=_SafeLoader))


def _load_yaml(path: Path) -> list[Any]:
    """Parsed documents of a YAML file, cached per modification time (CRDs are large)."""
    return _load_yaml_cached(path.resolve(), path.stat().st_mtime)


class KubeEmulator:
    """An in-process Kubernetes API server for the real kubernetes-asyncio client and kubectl.

    `async with KubeEmulator() as kube:` serves on 127.0.0.1 (a free port unless `port` is
    given). Bookmarks are sent every `bookmark_interval` seconds to watches that ask for them;
    watches without timeoutSeconds end after `watch_timeout`. With `insecure_admin`, requests
    without credentials act as a cluster admin, like kube-apiserver's old insecure port: kubectl
    sends no bearer token over plain http, so the standalone http mode turns it on.
    """

    def __init__(
        self,
        *,
        tls: bool = False,
        container_runtime: ContainerRuntime | None = None,
        pod_start_latency: float = 0.0,
        watch_history: int = 1000,
        bookmark_interval: float = 60.0,
        watch_timeout: float = 1800.0,
        garbage_collection: bool = True,
        kubelet: bool = True,
        strict_namespaces: bool = True,
        restart_backoff: float = 1.0,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock = utcnow,
        fault_seed: int | None = None,
        insecure_admin: bool = False,
        run_project_image: bool = False,
        project_image: str = PROJECT_IMAGE,
        nodes: int = 1,
    ) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes must be between 1 and {MAX_NODES}, not {nodes}")
        self.tls = tls
        self.host = host
        self.port = port
        self.store = Store(history=watch_history)
        self.catalog = Catalog()
        for rt in BUILTINS:
            self.catalog.add(rt)
        self.registry = Registry(
            store=self.store,
            catalog=self.catalog,
            clock=clock,
            strict_namespaces=strict_namespaces,
            garbage_collection=garbage_collection,
        )
        self.tokens = Tokens(clock=clock)
        self.admin_token = self.tokens.issue(
            User(ADMIN_USER, (*ADMIN_GROUPS, "system:authenticated"))
        )
        self.authorizer = Authorizer(self.store)
        self.faults = Faults(seed=fault_seed, clock=clock)
        self.requests = Requests()
        self._certificate = generate_certificate() if tls else None
        self._ca_pem = self._certificate.ca_pem if self._certificate else b""
        self.server = ApiServer(
            store=self.store,
            catalog=self.catalog,
            registry=self.registry,
            tokens=self.tokens,
            authorizer=self.authorizer,
            faults=self.faults,
            requests=self.requests,
            bookmark_interval=bookmark_interval,
            watch_timeout=watch_timeout,
            insecure_admin=insecure_admin,
        )
        self.controllers = Controllers(
            registry=self.registry,
            store=self.store,
            ca_pem=self._ca_pem.decode() or "sandbox-without-tls\n",
            gc=garbage_collection,
        )
        self.token_controller = TokenController(
            registry=self.registry,
            store=self.store,
            tokens=self.tokens,
            ca_pem=self._ca_pem.decode() or "sandbox-without-tls\n",
        )
        self.workloads = Workloads(registry=self.registry, store=self.store)
        self.disruption = DisruptionController(
            registry=self.registry, store=self.store, requests=lambda: self.controllers.requests
        )
        self.node_lifecycle = NodeLifecycle(registry=self.registry, store=self.store)
        runtime: ContainerRuntime = container_runtime or RunUntilDeleted()
        self.processes = (
            ProcessRuntime(
                store=self.store,
                cluster=ClusterAccess(
                    url=lambda: self.url,
                    ca_pem=self._ca_pem,
                    token_for=self.service_account_token,
                ),
                fallback=runtime,
                image=project_image,
            )
            if run_project_image
            else None
        )
        if self.processes is not None:
            self.server.pod_logs = self.processes.logs
        self.kubelet = (
            Kubelet(
                registry=self.registry,
                store=self.store,
                runtime=self.processes or runtime,
                start_latency=pod_start_latency,
                restart_backoff=restart_backoff,
                nodes=node_names(nodes),
            )
            if kubelet
            else None
        )
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.url = ""

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> KubeEmulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.controllers.run(), name="kube-controllers"))
        self._tasks.append(
            asyncio.create_task(self.token_controller.run(), name="kube-token-controller")
        )
        self._tasks.append(asyncio.create_task(self.workloads.run(), name="kube-workloads"))
        self._tasks.append(asyncio.create_task(self.disruption.run(), name="kube-disruption"))
        self._tasks.append(
            asyncio.create_task(self.node_lifecycle.run(), name="kube-node-lifecycle")
        )
        if self.kubelet is not None:
            self._tasks.append(asyncio.create_task(self.kubelet.run(), name="kube-kubelet"))
        await asyncio.sleep(0)
        self._seed()
        self._runner = web.AppRunner(self.server.app(), shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner,
            self.host,
            self.port,
            ssl_context=(
                self._certificate.server_context(client_certificates=True)
                if self._certificate
                else None
            ),
        )
        try:
            await site.start()
        except OSError:
            # `async with` never reaches __aexit__ when __aenter__ raises: undo the start here.
            await self.stop()
            raise
        addr = self._runner.addresses[0]
        self.port = int(addr[1])
        scheme = "https" if self.tls else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"
        self.server.host = f"{self.host}:{self.port}"

    async def stop(self) -> None:
        self.faults.resume()
        for sub in list(self.store.subscriptions):
            sub.queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for task in reversed(self._tasks):
            await cancel(task)
        self._tasks.clear()
        if self.processes is not None:
            self.processes.close()

    def _seed(self) -> None:
        ns_type = self.catalog.preferred("", "namespaces")
        assert ns_type is not None
        for name in SEEDED_NAMESPACES:
            self.registry.create(ns_type, ns="", body={"metadata": {"name": name}})
            self.controllers.seed_namespace(name)
        if self.kubelet is not None:
            self.kubelet.register_node()
        bootstrap.seed(self.registry)

    # --- identities and clients --------------------------------------------------------------

    def client_certificate(self, user: str, groups: Iterable[str] = ()) -> tuple[bytes, bytes]:
        """A client certificate and key (PEM) the cluster CA signed: CN `user`, O `groups`.
        Only with `tls=True`."""
        if self._certificate is None:
            raise RuntimeError("client certificates need tls=True")
        return self._certificate.client_certificate(user, tuple(groups))

    def kubeconfig_dict(self, *, token: str | None = None) -> Obj:
        """A kubeconfig for the admin identity, or for the identity behind `token`.

        With TLS the admin authenticates with a client certificate, as in a kind or kubeadm
        admin kubeconfig; without it (and for `token`) with a bearer token."""
        cluster: Obj = {"server": self.url}
        user: Obj = {"token": token or self.admin_token}
        if self.tls:
            cluster["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
            if token is None:
                cert, key = self.client_certificate(ADMIN_USER, ADMIN_GROUPS)
                user = {
                    "client-certificate-data": base64.b64encode(cert).decode(),
                    "client-key-data": base64.b64encode(key).decode(),
                }
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sandbox", "cluster": cluster}],
            "users": [{"name": "sandbox-user", "user": user}],
            "contexts": [
                {
                    "name": "sandbox",
                    "context": {
                        "cluster": "sandbox",
                        "user": "sandbox-user",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "sandbox",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | os.PathLike[str], *, token: str | None = None) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(yaml.safe_dump(self.kubeconfig_dict(token=token)))
        partial.chmod(0o600)
        partial.replace(target)

    async def configuration(self, *, token: str | None = None) -> client.Configuration:
        """A kubernetes-asyncio Configuration for the admin, or for the identity of `token`."""
        # Imported here so the standalone server starts without loading the client library.
        from shared.kube.client import configuration_from_dict

        return await configuration_from_dict(self.kubeconfig_dict(token=token))

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token authenticating as system:serviceaccount:NAMESPACE:NAME."""
        sa = self.store.get(("", "serviceaccounts"), namespace, name)
        uid = sa["metadata"]["uid"] if sa else ""
        return self.tokens.issue(service_account_user(namespace, name, uid=uid))

    def user_token(self, name: str, groups: Iterable[str] = ()) -> str:
        """A bearer token for an arbitrary user (and groups), for RBAC tests."""
        return self.tokens.issue(User(name, (*groups, "system:authenticated")))

    # --- direct setup ------------------------------------------------------------------------

    def apply_crds(self, crds: Iterable[str | os.PathLike[str] | Obj]) -> list[str]:
        """Register CRDs from YAML files (multi-document allowed) or dicts; returns their names."""
        crd_type = self.catalog.preferred("apiextensions.k8s.io", "customresourcedefinitions")
        assert crd_type is not None
        names = []
        for item in crds:
            docs = [item] if isinstance(item, dict) else copy.deepcopy(_load_yaml(Path(item)))
            for doc in docs:
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = doc["metadata"]["name"]
                existing = self.store.get(crd_type.key, "", name)
                if existing is None:
                    self.registry.create(crd_type, ns="", body=doc)
                else:
                    body = json.loads(json.dumps(doc))
                    body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
                    self.registry.update(crd_type, ns="", name=name, body=body)
                names.append(name)
        return names

    def apply(self, obj: Obj) -> Obj:
        """Create an object of any served kind through the normal write path (test setup)."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        rt = self.catalog.by_kind(api_version, kind)
        if rt is None:
            raise ApiError(
                404, "NotFound", message=f"no kind {kind!r} in {api_version!r} is served"
            )
        ns = obj.get("metadata", {}).get("namespace", "default") if rt.namespaced else ""
        return copy.deepcopy(self.registry.create(rt, ns=ns, body=obj))
