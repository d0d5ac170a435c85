"""Building kubernetes-asyncio clients: the configuration, and an `ApiClient` to send through.

Every `Configuration` is explicit, never the library's global default, and the proxy is resolved
once here. Requests go through `shared.kube.objects.Objects`, which adds the other rules (a
timeout on every request, merge patches sent as `application/merge-patch+json`, errors mapped to
`shared.kube.errors`). Why each rule exists: docs/listener.md, "Kubernetes requests". A process
that makes only a few calls can skip this library's import with `shared.kube.http`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import aiohttp
from kubernetes_asyncio import client, config

from shared.kube.http import DEFAULT_TIMEOUT_SECONDS, MERGE_PATCH, environment_proxy, user_agent
from shared.telemetry.logs import mask
from shared.typedefs import JSONDict

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MERGE_PATCH",
    "configuration_from_dict",
    "environment_proxy",
    "load_configuration",
    "new_api_client",
    "user_agent",
]


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


def new_api_client(
    configuration: client.Configuration,
    *,
    user_agent: str,
    environ: Mapping[str, str] | None = None,
) -> client.ApiClient:
    """An ApiClient whose HTTP session does not consult the environment on every request, and
    that sends `user_agent` (made by `user_agent(program)`) instead of the generator's name.

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
    api.user_agent = user_agent
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
