"""Listening sockets bound as Go's `net.Listen("tcp", addr)` binds them.

ARC's processes listen on addresses such as `:8080`: in Go an empty host, like any unspecified
address (`0.0.0.0`, `::`), is every address of both families, served by one dual-stack socket on
`[::]` that also accepts IPv4 (as IPv4-mapped addresses). Binding `0.0.0.0` instead would leave
a single-stack IPv6 cluster's probes unanswered, and the kubelet would restart the pod. Where
the host has no IPv6 the socket is an IPv4 one on `0.0.0.0`, as in Go. Any other host binds
that host only.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

_BACKLOG = 128


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket on `host`:`port` (port 0 picks a free port);
    an empty or unspecified host is every IPv4 and IPv6 address. Raises OSError."""
    if _unspecified(host):
        try:
            sock = _bound(socket.AF_INET6, ("::", port), dual_stack=True)
        except OSError as exc:
            # A taken port is taken for IPv4 too; anything else means no IPv6 here.
            if exc.errno == errno.EADDRINUSE:
                raise
            sock = _bound(socket.AF_INET, ("0.0.0.0", port), dual_stack=False)
    else:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = _bound(family, address, dual_stack=False)
    sock.listen(_BACKLOG)
    sock.setblocking(False)
    return sock


def _unspecified(host: str) -> bool:
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _bound(
    family: socket.AddressFamily, address: tuple[object, ...], *, dual_stack: bool
) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual_stack else 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock
