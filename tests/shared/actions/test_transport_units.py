"""Proxy selection, URL building, User-Agent and CA bundle handling (no network)."""

from __future__ import annotations

import json

import pytest

from shared.actions import InvalidArgument, ProxySettings, SystemInfo
from shared.actions.transport import ssl_context, user_agent
from shared.actions.urls import join_url, with_query


@pytest.mark.parametrize(
    ("env", "url", "proxy"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, "https://api.github.com/x", "http://p:3128"),
        ({"https_proxy": "http://p:3128"}, "https://api.github.com/x", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://ghes.corp/x", None),
        ({"HTTP_PROXY": "p:3128"}, "http://ghes.corp/x", "http://p:3128"),
        ({"HTTP_PROXY": "http://up:1", "http_proxy": "http://low:2"}, "http://h/x", "http://up:1"),
        ({}, "https://api.github.com/x", None),
    ],
)
def test_proxy_from_env(env: dict[str, str], url: str, proxy: str | None) -> None:
    assert ProxySettings.from_env(env).proxy_for(url) == proxy


@pytest.mark.parametrize(
    ("no_proxy", "url", "bypassed"),
    [
        ("*", "https://api.github.com/", True),
        ("github.com", "https://api.github.com/", True),
        (".github.com", "https://api.github.com/", True),
        ("github.com", "https://notgithub.com/", False),
        ("api.github.com:443", "https://api.github.com:443/", True),
        ("api.github.com:8443", "https://api.github.com:443/", False),
        ("10.0.0.0/8", "https://10.1.2.3/", True),
        ("10.0.0.0/8", "https://11.1.2.3/", False),
        ("127.0.0.1", "http://127.0.0.1:9000/", True),
        ("[::1]", "http://[::1]:9000/", True),
        (" , other.example ,", "https://api.github.com/", False),
    ],
)
def test_no_proxy(no_proxy: str, url: str, bypassed: bool) -> None:
    settings = ProxySettings(http_proxy="http://p:1", https_proxy="http://p:1", no_proxy=no_proxy)
    assert (settings.proxy_for(url) is None) is bypassed


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("http://h/tenant/123/", "_apis/x", "http://h/tenant/123/_apis/x"),
        ("http://h/tenant/123", "/_apis/x", "http://h/tenant/123/_apis/x"),
        ("http://h/tenant//123/", "_apis/groups/", "http://h/tenant/123/_apis/groups/"),
        ("http://h/broker/message?sessionId=s", "42", "http://h/broker/message/42?sessionId=s"),
    ],
)
def test_join_url(base: str, path: str, url: str) -> None:
    assert join_url(base, path) == url


def test_with_query_sorts_and_keeps_existing() -> None:
    url = with_query("http://h/x?name=banana", {"api-version": "6.0-preview", "a b": "c&d"})
    assert url == "http://h/x?a+b=c%26d&api-version=6.0-preview&name=banana"


def test_user_agent_is_compact_json_in_go_key_order() -> None:
    agent = user_agent(
        SystemInfo(
            system="actions-runner-controller",
            version="0.13.0",
            commit_sha="abc",
            scale_set_id=7,
            subsystem="ghalistener",
        ),
        build_version="0.1.0",
    )
    assert " " not in agent
    assert list(json.loads(agent).items()) == [
        ("system", "actions-runner-controller"),
        ("version", "0.13.0"),
        ("commit_sha", "abc"),
        ("scale_set_id", 7),
        ("subsystem", "ghalistener"),
        ("build_version", "0.1.0"),
        ("build_commit_sha", "0.1.0"),
        ("kind", "scaleset"),
    ]


def test_invalid_root_ca_is_rejected() -> None:
    bogus = "-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n"
    with pytest.raises(InvalidArgument, match="root CA"):
        ssl_context(bogus)


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({"http_proxy": "http://p:1"}, True),
        ({"HTTPS_PROXY": "http://p:1"}, True),
        ({"NO_PROXY": "*"}, False),
        ({}, False),
    ],
)
def test_proxy_enabled(env: dict[str, str], enabled: bool) -> None:
    assert ProxySettings.from_env(env).enabled is enabled


@pytest.mark.parametrize(
    ("settings", "passwords"),
    [
        (ProxySettings(http_proxy="http://u:pw1@p:1", https_proxy="u:pw2@p:2"), {"pw1", "pw2"}),
        (ProxySettings(http_proxy="http://p:1"), set()),
    ],
)
def test_proxy_passwords(settings: ProxySettings, passwords: set[str]) -> None:
    assert settings.passwords == passwords
