"""Whether this host has IPv6: tests of dual-stack listening skip their IPv6 half without it."""

from __future__ import annotations

import socket


def ipv6_loopback() -> bool:
    """Whether this host can bind ::1 (containers often run without IPv6)."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True
