"""A runner spec's `proxy` and `githubServerTLS`, resolved against its namespace.

`proxy.{http,https}.credentialSecretRef` names a Secret with `username` and `password`, put into
the proxy URL as userinfo (docs/reconcilers.md#proxy-and-tls). `githubServerTLS.certificateFrom
.configMapKeyRef` names the ConfigMap key holding the extra root CA (PEM). Both are read through
the API, never from a cache: neither kind is watched.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

from shared.api.names import (
    ENV_HTTP_PROXY,
    ENV_HTTPS_PROXY,
    ENV_NO_PROXY,
    SECRET_PROXY_PASSWORD,
    SECRET_PROXY_USERNAME,
)
from shared.kube.objects import CONFIG_MAP, SECRET, Objects
from shared.kube.views import secret_value
from shared.telemetry.logs import mask
from shared.typedefs import JSONDict


def _with_userinfo(url: str, username: str, password: str) -> str:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    userinfo = quote(username, safe="")
    if password:
        userinfo += ":" + quote(password, safe="")
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, ""))


async def _server_url(objects: Objects, namespace: str, server: JSONDict | None) -> str:
    if not server or not server.get("url"):
        return ""
    url = str(server["url"])
    ref = server.get("credentialSecretRef")
    if not ref:
        return url
    secret = await objects.get(SECRET, namespace, str(ref))
    password = secret_value(secret, SECRET_PROXY_PASSWORD) or ""
    # Registered for redaction as read, and as it appears in the proxy URL.
    mask(password, quote(password, safe=""))
    return _with_userinfo(url, secret_value(secret, SECRET_PROXY_USERNAME) or "", password)


async def proxy_data(objects: Objects, namespace: str, proxy: JSONDict | None) -> dict[str, str]:
    """ARC's `ProxyConfig.ToSecretData()`: always all three keys, empty when unset."""
    proxy = proxy or {}
    return {
        ENV_HTTP_PROXY: await _server_url(objects, namespace, proxy.get("http")),
        ENV_HTTPS_PROXY: await _server_url(objects, namespace, proxy.get("https")),
        ENV_NO_PROXY: ",".join(str(h) for h in proxy.get("noProxy") or []),
    }


async def root_ca(objects: Objects, namespace: str, tls: JSONDict | None) -> str | None:
    """The PEM of `githubServerTLS`, or None when the spec has none."""
    ref = ((tls or {}).get("certificateFrom") or {}).get("configMapKeyRef")
    if not ref:
        return None
    config_map = await objects.get(CONFIG_MAP, namespace, str(ref["name"]))
    pem = (config_map.get("data") or {}).get(str(ref["key"]))
    if not isinstance(pem, str) or not pem.strip():
        raise ValueError(f"configmap {ref['name']} has no PEM under key {ref['key']}")
    return pem
