"""A light way to the API server for a process that makes a few calls: aiohttp alone.

kubernetes-asyncio cannot be imported in part: its package imports every API class and model
(about 40 MB of a process's memory, docs/listener.md#memory), and its kubeconfig loader comes
with them. The listener needs none of that: it sends a handful of JSON requests through
`shared.kube.objects.Objects`. So this module reads the connection itself for the cases that
need nothing but files (the pod's ServiceAccount; a kubeconfig with a token, a token file or a
client certificate, and a CA or insecure-skip-tls-verify) and sends requests with aiohttp.
A kubeconfig that needs more (an exec or auth-provider plugin, several files in KUBECONFIG,
basic auth, a TLS server name) raises `NeedsClientLibrary`, and the caller uses
kubernetes-asyncio's loader and ApiClient instead (`shared.kube.client`): correct for every
kubeconfig, at that memory cost.

`HttpApi.call_api` takes the arguments `Objects` passes to kubernetes-asyncio's
`ApiClient.call_api` and answers the same unread `aiohttp.ClientResponse`, so `Objects` (and its
error mapping onto `shared.kube.errors`) works over either.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote, urlsplit

import aiohttp

from shared.proxy import no_proxy_covers, proxy_variable
from shared.telemetry.logs import mask
from shared.version import package_version
from shared.wire import DecodeError, decode_yaml, read_file_capped

MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT_SECONDS = 30.0

MAX_KUBECONFIG_BYTES = 16 * 2**20
"""A kubeconfig with many clusters and their certificates is some hundreds of KiB."""

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0
"""A projected ServiceAccount token is rotated in its file; client-go reads it again each minute."""


def user_agent(program: str) -> str:
    """The User-Agent of a process's Kubernetes requests: `<program>/<version>`.

    The API server names the field manager of a write after the User-Agent's part before the
    first "/", so managedFields, audit logs and API priority-and-fairness rules can tell
    `gha-controller` and `gha-listener` from any other client (docs/listener.md, "Kubernetes
    requests"); kubernetes-asyncio's and aiohttp's defaults would say `OpenAPI-Generator` and
    `Python`.
    """
    return f"{program}/{package_version()}"


class NeedsClientLibrary(Exception):
    """The kubeconfig asks for something only kubernetes-asyncio's loader does; the message says
    what."""


class ConnectionConfigError(Exception):
    """The kubeconfig or the pod's ServiceAccount files cannot be used; the message says why."""


def environment_proxy(host: str, environ: Mapping[str, str]) -> str | None:
    """The proxy HTTPS_PROXY/HTTP_PROXY name for the API server at `host`, unless NO_PROXY
    exempts it (the variables client-go honours)."""
    url = urlsplit(host)
    proxy = proxy_variable(environ, f"{url.scheme or 'https'}_proxy")
    if not proxy:
        return None
    no_proxy = proxy_variable(environ, "no_proxy")
    if url.hostname and no_proxy_covers(url.hostname, url.port, no_proxy):
        return None
    return proxy


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the API server is and how to authenticate to it."""

    host: str
    ssl_context: ssl.SSLContext | None
    """None for plain http."""
    token: str = ""
    token_file: str = ""
    """Read again every TOKEN_REREAD_SECONDS; wins over `token`."""
    proxy: str | None = None


_UNSUPPORTED_USER_KEYS = ("exec", "auth-provider", "username", "password", "as", "as-groups")
_UNSUPPORTED_CLUSTER_KEYS = ("tls-server-name",)


def _pem(entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    """`key`-data (base64) or `key` (a file, relative to the kubeconfig's folder)."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except (binascii.Error, ValueError):
            raise ConnectionConfigError(f"{key}-data is not base64") from None
    path = entry.get(key)
    if path:
        return (base / str(path)).read_bytes()
    return None


def _ssl_context(
    host: str, cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path
) -> ssl.SSLContext | None:
    if urlsplit(host).scheme == "http":
        return None
    ca = _pem(cluster, "certificate-authority", base)
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    if cert and key:
        # load_cert_chain reads files only; the pair is removed as soon as it is loaded.
        with tempfile.TemporaryDirectory() as folder:
            cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
            cert_path.write_bytes(cert)
            key_path.touch(mode=0o600)
            key_path.write_bytes(key)
            context.load_cert_chain(cert_path, key_path)
    return context


def _named(entries: Sequence[Mapping[str, Any]] | None, name: str, what: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            found = entry.get(what)
            return found if isinstance(found, Mapping) else {}
    raise ConnectionConfigError(f"the kubeconfig has no {what} named {name!r}")


def from_kubeconfig(path: str, *, context: str | None = None) -> Connection:
    """The connection a kubeconfig file describes, or NeedsClientLibrary."""
    if os.pathsep in path:
        raise NeedsClientLibrary("KUBECONFIG names several files, which are merged")
    file = Path(path)
    try:
        text = read_file_capped(path, limit=MAX_KUBECONFIG_BYTES, what=path).decode("utf-8")
        loaded = decode_yaml(text, limit=MAX_KUBECONFIG_BYTES, what=path)
    except UnicodeDecodeError:
        raise ConnectionConfigError(f"{path} is not UTF-8 text") from None
    except DecodeError as exc:
        raise ConnectionConfigError(str(exc)) from None
    if not isinstance(loaded, Mapping):
        raise ConnectionConfigError(f"{path} is not a kubeconfig")
    name = context or loaded.get("current-context")
    if not name:
        raise ConnectionConfigError(f"{path} has no current-context")
    chosen = _named(loaded.get("contexts"), str(name), "context")
    cluster = _named(loaded.get("clusters"), str(chosen.get("cluster", "")), "cluster")
    user = _named(loaded.get("users"), str(chosen["user"]), "user") if chosen.get("user") else {}
    for key in _UNSUPPORTED_USER_KEYS:
        if user.get(key):
            raise NeedsClientLibrary(f"the kubeconfig's user has {key}")
    for key in _UNSUPPORTED_CLUSTER_KEYS:
        if cluster.get(key):
            raise NeedsClientLibrary(f"the kubeconfig's cluster has {key}")
    host = str(cluster.get("server") or "")
    if not host:
        raise ConnectionConfigError(f"the cluster of context {name!r} has no server")
    base = file.resolve().parent
    token_file = str(user.get("tokenFile") or "")
    token = str(user.get("token") or "")
    mask(token)
    return Connection(
        host=host.rstrip("/"),
        ssl_context=_ssl_context(host, cluster, user, base),
        token=token,
        token_file=str(base / token_file) if token_file else "",
        proxy=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
    )


def in_cluster(environ: Mapping[str, str], folder: Path = SERVICE_ACCOUNT_DIR) -> Connection:
    """The pod's own ServiceAccount, as client-go's in-cluster config finds it."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConnectionConfigError(
            "not in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset)"
        )
    token_file = folder / "token"
    if not token_file.is_file():
        raise ConnectionConfigError(f"no ServiceAccount token at {token_file}")
    if ":" in host:
        host = f"[{host}]"
    return Connection(
        host=f"https://{host}:{port}",
        ssl_context=ssl.create_default_context(cafile=str(folder / "ca.crt")),
        token_file=str(token_file),
    )


def load_connection(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Connection:
    """KUBECONFIG (or the given path) if set, else the in-cluster identity; NeedsClientLibrary
    when only kubernetes-asyncio can read it."""
    env = os.environ if environ is None else environ
    path = kubeconfig or env.get("KUBECONFIG")
    connection = from_kubeconfig(path, context=context) if path else in_cluster(env)
    if connection.proxy is None:
        proxy = environment_proxy(connection.host, env)
        if proxy:
            connection = Connection(
                host=connection.host,
                ssl_context=connection.ssl_context,
                token=connection.token,
                token_file=connection.token_file,
                proxy=proxy,
            )
    if connection.proxy:
        # A proxy URL may carry a password (`http://user:password@proxy:3128`).
        password = urlsplit(connection.proxy).password or ""
        mask(password, unquote(password))
    return connection


class HttpApi:
    """Sends `Objects`' requests with one aiohttp session. Use inside a running event loop, as
    an async context manager."""

    def __init__(self, connection: Connection, *, user_agent: str) -> None:
        """`user_agent`: what `user_agent(program)` makes of the process's name."""
        self.connection = connection
        self.host = connection.host
        self._session = aiohttp.ClientSession(
            trust_env=False, read_bufsize=2**21, headers={"User-Agent": user_agent}
        )
        self._token = connection.token
        self._token_read_at = -TOKEN_REREAD_SECONDS

    def _bearer(self) -> str:
        if self.connection.token_file:
            now = time.monotonic()
            if now - self._token_read_at >= TOKEN_REREAD_SECONDS:
                self._token = Path(self.connection.token_file).read_text().strip()
                mask(self._token)
                self._token_read_at = now
        return self._token

    async def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: Sequence[tuple[str, str]] = (),
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        auth_settings: Sequence[str] = (),
        _preload_content: bool = False,
        _request_timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """One request; the response unread (as kubernetes-asyncio answers with
        `_preload_content=False`), whatever its status."""
        headers = dict(header_params or {})
        token = self._bearer()
        if token and "BearerToken" in auth_settings:
            headers["Authorization"] = f"Bearer {token}"
        timeout = (
            _request_timeout
            if isinstance(_request_timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=_request_timeout)
        )
        return await self._session.request(
            method,
            self.host + resource_path,
            params=list(query_params),
            headers=headers,
            data=None if body is None else json.dumps(body).encode(),
            ssl=self.connection.ssl_context if self.connection.ssl_context is not None else True,
            proxy=self.connection.proxy,
            timeout=timeout,
        )

    async def close(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
