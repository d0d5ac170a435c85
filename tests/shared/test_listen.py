"""Listening sockets bound as Go binds `:8080`: every IPv4 and IPv6 address."""

from __future__ import annotations

import errno
import socket

import pytest

from shared.listen import listen_socket
from tests.ipv6 import ipv6_loopback


def connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["", "0.0.0.0", "::"])
def test_an_unspecified_host_listens_on_ipv4_and_ipv6(host: str) -> None:
    with listen_socket(host, 0) as sock:
        port = sock.getsockname()[1]
        assert connects("127.0.0.1", port)
        if ipv6_loopback():
            assert connects("::1", port)


def test_an_explicit_host_listens_on_that_host_only() -> None:
    with listen_socket("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        assert connects("127.0.0.1", port)
        assert not connects("::1", port)


def test_an_ipv6_host_listens_on_ipv6_only() -> None:
    if not ipv6_loopback():
        pytest.skip("no IPv6 on this host")
    with listen_socket("::1", 0) as sock:
        port = sock.getsockname()[1]
        assert connects("::1", port)
        assert not connects("127.0.0.1", port)


def test_a_taken_port_is_an_os_error() -> None:
    with listen_socket("", 0) as sock, pytest.raises(OSError, match="already in use") as raised:
        listen_socket("", sock.getsockname()[1])
    assert raised.value.errno == errno.EADDRINUSE
