"""One reading of HTTP(S)_PROXY and NO_PROXY for both clients (shared/proxy.py). Before, the
Kubernetes client read the lower-case spelling first and did not understand `[v6]:port`
entries, while the Actions client read them as Go does."""

from __future__ import annotations

import pytest

from shared.actions.transport import ProxySettings
from shared.kube.http import environment_proxy
from shared.proxy import no_proxy_covers, proxy_variable


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "covered"),
    [
        ("api.example.com", 443, "*", True),
        ("api.example.com", 443, "example.com", True),
        ("api.example.com", 443, ".example.com", True),
        ("example.com", 443, ".example.com", True),
        ("badexample.com", 443, "example.com", False),
        ("api.example.com", 443, "api.example.com:443", True),
        ("api.example.com", 6443, "api.example.com:443", False),
        ("10.0.0.7", 443, "10.0.0.0/8", True),
        ("11.0.0.7", 443, "10.0.0.0/8", False),
        ("fd00::1", 443, "[fd00::1]:443", True),
        ("[fd00::1]", 443, "fd00::/8", True),
        ("fd00::1", 80, "[fd00::1]:443", False),
        ("127.0.0.1", 80, "", False),
        ("API.Example.COM", None, " example.com , other ", True),
    ],
)
def test_no_proxy_covers(host: str, port: int | None, no_proxy: str, covered: bool) -> None:
    assert no_proxy_covers(host, port, no_proxy) is covered


def test_upper_case_first_as_go_reads_them() -> None:
    env = {"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128"}
    assert proxy_variable(env, "https_proxy") == "http://upper:3128"
    assert proxy_variable({"no_proxy": "x"}, "no_proxy") == "x"


def test_both_clients_read_the_same_environment() -> None:
    env = {
        "HTTPS_PROXY": "http://upper:3128",
        "https_proxy": "http://lower:3128",
        "NO_PROXY": "[fd00::1]:6443",
    }
    for url in ("https://kube.example:6443", "https://[fd00::1]:6443"):
        expected = ProxySettings.from_env(env).proxy_for(url)
        assert environment_proxy(url, env) == expected
    assert environment_proxy("https://[fd00::1]:6443", env) is None
    assert environment_proxy("https://kube.example:6443", env) == "http://upper:3128"
