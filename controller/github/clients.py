"""Actions service clients for the runner reconcilers, one per GitHub configuration.

ARC reads the GitHub config Secret through the API before every Actions call
(docs/reconcilers.md#requests). Here a client is kept per (namespace, secret name, config URL)
and the Secret is read again only after `credentials_ttl` seconds, or after the service rejected
the credentials, so a rotated secret is picked up without paying one GET per call.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from controller.github.credentials import (
    REASON_VAULT_NOT_SUPPORTED,
    secret_credentials,
    vault_refusal,
)
from controller.github.network import proxy_data, root_ca
from shared.actions.client import ActionsClient
from shared.actions.config import insecure_url_refusal
from shared.actions.credentials import Credentials
from shared.actions.errors import (
    ActionsError,
    AuthenticationFailed,
    InvalidCredentials,
    JobStillRunning,
    RunnerNotFound,
)
from shared.actions.transport import ProxySettings, SystemInfo
from shared.api.names import (
    ENV_HTTP_PROXY,
    ENV_HTTPS_PROXY,
    ENV_NO_PROXY,
)
from shared.api.references import runner_spec_name_problems
from shared.kube.errors import Forbidden, NotFound
from shared.kube.objects import SECRET, Objects
from shared.telemetry.logs import redact
from shared.typedefs import JSONDict

REASON_CONFIG_SECRET_NOT_FOUND = "GitHubConfigSecretNotFound"
REASON_CONFIG_UNREADABLE = "GitHubConfigUnreadable"
REASON_INVALID_CREDENTIALS = "InvalidGitHubCredentials"
REASON_NETWORK_CONFIG_INVALID = "GitHubNetworkConfigInvalid"
REASON_INSECURE_URL = "InsecureGitHubConfigUrl"
ALLOW_INSECURE_SETTING = "GHA_CONTROLLER_ALLOW_INSECURE_GITHUB"
REASON_INVALID_NAME = "InvalidName"


class GitHubConfigError(Exception):
    """A runner spec's GitHub configuration cannot be used as it is: its config Secret is
    missing or unreadable, holds no usable credentials, or a proxy Secret or CA ConfigMap it
    names is missing. Nothing was sent to GitHub and retrying alone will not help. `reason` is
    a CamelCase word for a status or an Event; the message names objects, never their data."""

    def __init__(self, reason: str, message: str) -> None:
        message = redact(message)
        super().__init__(message)
        self.reason = reason
        self.message = message


class ClientFactory(Protocol):
    def __call__(
        self,
        config_url: str,
        credentials: Credentials,
        *,
        proxy: ProxySettings | None,
        root_ca_pem: str | None,
    ) -> ActionsClient: ...


SUBSYSTEM = "gha-scale-set-controller"
"""The User-Agent's subsystem: ARC's controller's, so request logs and dashboards keyed on it
read the same (docs/actions-client.md#user-agent)."""


def default_factory(
    config_url: str,
    credentials: Credentials,
    *,
    proxy: ProxySettings | None,
    root_ca_pem: str | None,
) -> ActionsClient:
    return ActionsClient(
        config_url=config_url,
        credentials=credentials,
        system_info=SystemInfo(subsystem=SUBSYSTEM),
        proxy=proxy,
        root_ca_pem=root_ca_pem,
    )


def credentials_from_secret(secret: JSONDict) -> Credentials:
    """The client's credentials from a GitHub config Secret (`credentials.secret_credentials`);
    InvalidCredentials unless exactly one of a PAT and a GitHub App is complete."""
    return secret_credentials(secret).credentials()


@dataclass(frozen=True, slots=True)
class _Key:
    namespace: str
    secret: str
    url: str
    network: str
    """The spec's proxy and TLS settings (JSON): another proxy is another client."""


def _key(namespace: str, spec: JSONDict) -> _Key:
    network = json.dumps(
        [spec.get("proxy"), spec.get("githubServerTLS")], sort_keys=True, default=str
    )
    return _Key(
        namespace,
        str(spec.get("githubConfigSecret", "")),
        str(spec.get("githubConfigUrl", "")),
        network,
    )


@dataclass(slots=True)
class _Entry:
    client: ActionsClient
    read_at: float
    secret_version: str


class ActionsClients:
    """Clients by GitHub configuration of a runner spec (`githubConfigUrl`,
    `githubConfigSecret` in the object's namespace)."""

    def __init__(
        self,
        *,
        objects: Objects,
        factory: ClientFactory = default_factory,
        credentials_ttl: float = 300.0,
        allow_insecure: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`allow_insecure`: accept plain http:// URLs off loopback (RunnerSettings)."""
        self._objects = objects
        self._allow_insecure = allow_insecure
        self._factory = factory
        self._ttl = credentials_ttl
        self._clock = clock
        self._entries: dict[_Key, _Entry] = {}
        self._lock = asyncio.Lock()

    async def for_spec(self, namespace: str, spec: JSONDict) -> ActionsClient:
        """The client of this spec's GitHub configuration; GitHubConfigError, before any
        Secret is read, when its `githubConfigUrl` is plain http and that is not allowed, when
        a name it gives is not one, or when it names a Key Vault (`vault_refusal`)."""
        # Before any read: a name that is not one would address another namespace's Secret.
        if problems := runner_spec_name_problems(spec):
            raise GitHubConfigError(REASON_INVALID_NAME, "; ".join(problems))
        if refusal := vault_refusal(spec):
            raise GitHubConfigError(REASON_VAULT_NOT_SUPPORTED, refusal)
        key = _key(namespace, spec)
        refusal = insecure_url_refusal(
            key.url,
            field="githubConfigUrl",
            allowed=self._allow_insecure,
            opt_in=ALLOW_INSECURE_SETTING,
        )
        if refusal:
            raise GitHubConfigError(REASON_INSECURE_URL, refusal)
        async with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._clock() - entry.read_at < self._ttl:
                return entry.client
            secret = await self._config_secret(namespace, key.secret)
            version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
            now = self._clock()
            if entry is not None and entry.secret_version == version:
                entry.read_at = now
                return entry.client
            try:
                credentials = credentials_from_secret(secret)
            except InvalidCredentials as exc:
                raise GitHubConfigError(
                    REASON_INVALID_CREDENTIALS, f"secret {key.secret}: {exc.message}"
                ) from None
            proxy, pem = await self._network(namespace, spec)
            client = self._factory(key.url, credentials, proxy=proxy, root_ca_pem=pem)
            if entry is not None:
                await entry.client.aclose()
            self._entries[key] = _Entry(client, now, version)
            return client

    async def _config_secret(self, namespace: str, name: str) -> JSONDict:
        try:
            return await self._objects.get(SECRET, namespace, name)
        except NotFound:
            raise GitHubConfigError(
                REASON_CONFIG_SECRET_NOT_FOUND,
                f"the GitHub config secret {name} does not exist in namespace {namespace}",
            ) from None
        except Forbidden:
            raise GitHubConfigError(
                REASON_CONFIG_UNREADABLE,
                f"the controller may not read the GitHub config secret {name} in namespace "
                f"{namespace}",
            ) from None

    async def _network(
        self, namespace: str, spec: JSONDict
    ) -> tuple[ProxySettings | None, str | None]:
        """The spec's proxy and extra root CA; a Secret or ConfigMap they name that is missing
        or unusable is a GitHubConfigError."""
        try:
            proxy: ProxySettings | None = None
            if spec.get("proxy"):
                data = await proxy_data(self._objects, namespace, spec["proxy"])
                proxy = ProxySettings(
                    http_proxy=data[ENV_HTTP_PROXY],
                    https_proxy=data[ENV_HTTPS_PROXY],
                    no_proxy=data[ENV_NO_PROXY],
                )
            return proxy, await root_ca(self._objects, namespace, spec.get("githubServerTLS"))
        except (NotFound, Forbidden) as exc:
            raise GitHubConfigError(
                REASON_NETWORK_CONFIG_INVALID, f"proxy or githubServerTLS: {exc.status_message}"
            ) from None
        except ValueError as exc:
            raise GitHubConfigError(REASON_NETWORK_CONFIG_INVALID, str(exc)) from None

    async def remove_runner(self, namespace: str, spec: JSONDict, runner_id: int) -> bool:
        """Unregister a runner; False while the service says it runs a job (a runner the service
        does not know counts as removed)."""
        client = await self.for_spec(namespace, spec)
        try:
            await client.remove_runner(runner_id)
        except RunnerNotFound:
            pass
        except JobStillRunning:
            return False
        except ActionsError as exc:
            self.rejected(namespace, spec, exc)
            raise
        return True

    def rejected(self, namespace: str, spec: JSONDict, error: Exception) -> None:
        """Forget the credentials' freshness after the service refused them."""
        if isinstance(error, AuthenticationFailed):
            entry = self._entries.get(_key(namespace, spec))
            if entry is not None:
                entry.read_at = float("-inf")
                entry.secret_version = ""

    async def aclose(self) -> None:
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            await entry.client.aclose()
