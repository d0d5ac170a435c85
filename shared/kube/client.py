"""Building kubernetes-asyncio clients, and a thin custom-object client with the project's rules.

Rules enforced here so callers cannot forget them (python-stack.md 1.2, 1.3, 1.8): an explicit
`Configuration` (never the global default), a timeout on every request, merge patches sent as
`application/merge-patch+json`, and errors mapped to `shared.kube.errors`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client, config

from shared.kube.errors import kube_errors

GROUP = "actions.github.com"
VERSION = "v1alpha1"
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
