"""Building kubernetes-asyncio clients: the configuration, and an `ApiClient` to send through.

Every `Configuration` is explicit, never the library's global default, and the proxy is resolved
once here. Requests go through `shared.kube.objects.Objects`, which adds the other rules (a
timeout on every request, merge patches sent as `application/merge-patch+json`, errors mapped to
`shared.kube.errors`). Why each rule exists: docs/listener.md, "Kubernetes requests".
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client, config

from shared.telemetry.logs import mask
from shared.typedefs import JSONDict

MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT_SECONDS = 30.0


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
    bearer = cfg.api_key.get("BearerToken", "")
    mask(bearer.removeprefix("Bearer "))
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
