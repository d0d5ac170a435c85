"""Building kubernetes-asyncio clients, and a thin custom-object client with the project's rules.

Rules enforced here so callers cannot forget them (python-stack.md 1.2, 1.3, 1.8): an explicit
`Configuration` (never the global default), a timeout on every request, merge patches sent as
`application/merge-patch+json`, and errors mapped to `shared.kube.errors`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client, config

from shared.api.names import GROUP, VERSION
from shared.kube.errors import kube_errors

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
DEFAULT_TIMEOUT_SECONDS = 30.0

JSONDict = dict[str, Any]


async def load_configuration(
    kubeconfig: str | None = None, *, context: str | None = None
) -> client.Configuration:
    """A Configuration from KUBECONFIG (or the given path) if set, else the in-cluster identity."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        await config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=cfg,
            persist_config=False,
        )
    else:
        config.load_incluster_config(client_configuration=cfg)
    return cfg


async def configuration_from_dict(kubeconfig: JSONDict) -> client.Configuration:
    """A Configuration from an in-memory kubeconfig (tests, the embedded sandbox)."""
    cfg = client.Configuration()
    await config.load_kube_config_from_dict(kubeconfig, client_configuration=cfg)
    return cfg


def _exempt(hostname: str, port: int | None, no_proxy: str) -> bool:
    """Whether NO_PROXY (hosts, .domains, host:port, IPs, CIDRs, or *) covers the server."""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if ipaddress.ip_address(hostname) in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and port is not None and entry_port != str(port):
            continue
        name = name.lstrip(".")
        if hostname == name or hostname.endswith("." + name):
            return True
    return False


def environment_proxy(host: str, environ: Mapping[str, str]) -> str | None:
    """The proxy HTTPS_PROXY/HTTP_PROXY name for the API server at `host`, unless NO_PROXY
    exempts it (the variables client-go honours)."""
    url = urlsplit(host)
    scheme = url.scheme or "https"
    proxy = environ.get(f"{scheme}_proxy") or environ.get(f"{scheme.upper()}_PROXY")
    if not proxy:
        return None
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    if url.hostname and _exempt(url.hostname.lower(), url.port, no_proxy):
        return None
    return proxy


def new_api_client(
    configuration: client.Configuration, *, environ: Mapping[str, str] | None = None
) -> client.ApiClient:
    """An ApiClient whose HTTP session does not consult the environment on every request.

    kubernetes-asyncio opens its session with `trust_env=True`, so aiohttp looks up proxy
    variables and ~/.netrc in a thread pool for each request: two executor hops per call, a
    fifth to a third of a busy controller's CPU. The proxy is resolved here once instead.
    Call it inside a running event loop; close the client as usual.
    """
    if not configuration.proxy:
        configuration.proxy = environment_proxy(
            configuration.host, os.environ if environ is None else environ
        )
    api = client.ApiClient(configuration)
    rest = api.rest_client
    env_session: aiohttp.ClientSession = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=env_session.connector,
        trust_env=False,
        read_bufsize=2**21,
    )
    env_session.detach()
    rest.proxy = configuration.proxy
    return api


@dataclass(frozen=True, slots=True)
class Resource:
    """A namespaced custom resource of the actions.github.com group."""

    plural: str
    group: str = GROUP
    version: str = VERSION


EPHEMERAL_RUNNERS = Resource("ephemeralrunners")
EPHEMERAL_RUNNER_SETS = Resource("ephemeralrunnersets")
AUTOSCALING_RUNNER_SETS = Resource("autoscalingrunnersets")
AUTOSCALING_LISTENERS = Resource("autoscalinglisteners")


class CustomObjects:
    """Namespaced custom-object calls returning plain dicts, with timeouts and mapped errors."""

    def __init__(self, api: client.ApiClient, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self._api = client.CustomObjectsApi(api)
        self._timeout = timeout

    async def get(self, res: Resource, namespace: str, name: str) -> JSONDict:
        async with kube_errors():
            obj: JSONDict = await self._api.get_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                _request_timeout=self._timeout,
            )
        return obj

    async def list(
        self, res: Resource, namespace: str, *, label_selector: str | None = None
    ) -> JSONDict:
        kwargs: JSONDict = {"_request_timeout": self._timeout}
        if label_selector:
            kwargs["label_selector"] = label_selector
        async with kube_errors():
            obj: JSONDict = await self._api.list_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, **kwargs
            )
        return obj

    async def create(self, res: Resource, namespace: str, body: JSONDict) -> JSONDict:
        async with kube_errors():
            obj: JSONDict = await self._api.create_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                body,
                _request_timeout=self._timeout,
            )
        return obj

    async def patch(
        self, res: Resource, namespace: str, name: str, patch: JSONDict, *, status: bool = False
    ) -> JSONDict:
        """A JSON merge patch of the object, or of its /status subresource."""
        call = (
            self._api.patch_namespaced_custom_object_status
            if status
            else self._api.patch_namespaced_custom_object
        )
        async with kube_errors():
            obj: JSONDict = await call(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                patch,
                _content_type=MERGE_PATCH,
                _request_timeout=self._timeout,
            )
        return obj

    async def delete(
        self, res: Resource, namespace: str, name: str, *, uid: str | None = None
    ) -> None:
        body: JSONDict = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        async with kube_errors():
            await self._api.delete_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                body=body,
                _request_timeout=self._timeout,
            )
