"""HTTP(S)_PROXY and NO_PROXY, read one way for both clients (the Kubernetes API's and the
Actions service's), with Go's precedence since ARC's processes and client-go read them so.

NO_PROXY entries are `*`, host names (also matching subdomains, with or without a leading dot),
`host:port` (`[v6]:port` for IPv6), IP addresses and CIDR ranges. Unlike Go, loopback addresses
are proxied unless listed: a proxy is only ever used when configured.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping


def proxy_variable(env: Mapping[str, str], name: str) -> str:
    """`NAME`, else `name` (Go's httpproxy reads the upper-case spelling first)."""
    return env.get(name.upper()) or env.get(name.lower()) or ""


def no_proxy_covers(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether `no_proxy` exempts `host` (and `port`) from the proxy."""
    host = host.lower().strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        entry_host, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
        if entry_port and port is not None and entry_port != str(port):
            continue
        entry_host = entry_host.strip("[]").lstrip(".")
        if host == entry_host or host.endswith("." + entry_host):
            return True
    return False


def _has_port(entry: str) -> bool:
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and (head.count(":") == 0 or head.endswith("]"))
