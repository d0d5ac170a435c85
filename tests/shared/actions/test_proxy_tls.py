"""Proxy variables (through a real loopback proxy) and custom CA bundles (emulator over TLS)."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import aiohttp
import pytest
import pytest_asyncio

from sandbox.actions import ActionsEmulator
from shared.actions import ActionsConnectionError, PersonalAccessToken, ProxySettings

from .conftest import ClientFactory, RecordedSleeps
from .proxy import ForwardingProxy


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[ForwardingProxy]:
    async with ForwardingProxy() as running:
        yield running


@pytest_asyncio.fixture
async def tls_actions() -> AsyncIterator[ActionsEmulator]:
    async with ActionsEmulator(tls=True, long_poll_timeout=0.5) as gh:
        yield gh


def _ca(gh: ActionsEmulator) -> bytes:
    assert gh.ca_pem is not None
    return gh.ca_pem


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy"])
async def test_http_proxy_variable_routes_every_request(
    actions: ActionsEmulator, make_client: ClientFactory, proxy: ForwardingProxy, variable: str
) -> None:
    client = make_client(env={variable: proxy.url})
    await client.get_runner_group_by_name("default")
    served = [(r.method, r.path) for r in actions.state.requests]
    proxied = [(method, urlsplit(target).path) for method, target in proxy.requests]
    assert proxied == served
    assert all(target.startswith(actions.url) for _, target in proxy.requests)


@pytest.mark.parametrize("tls", [False, True])
async def test_proxy_credentials_from_url(
    make_client: ClientFactory, proxy: ForwardingProxy, tls: bool
) -> None:
    async with ActionsEmulator(tls=tls) as gh:
        authority = urlsplit(proxy.url).netloc
        variable = "HTTPS_PROXY" if tls else "HTTP_PROXY"
        client = make_client(
            config_url=gh.config_url(),
            credentials=PersonalAccessToken(gh.add_pat()),
            root_ca_pem=gh.ca_pem,
            env={variable: f"http://scaler:s3cret-pw@{authority}"},
        )
        await client.get_runner_group_by_name("default")
    expected = "Basic " + base64.b64encode(b"scaler:s3cret-pw").decode()
    assert proxy.authorizations
    assert set(proxy.authorizations) == {expected}
    assert "s3cret-pw" in client.secrets


async def test_no_proxy_bypasses(
    actions: ActionsEmulator, make_client: ClientFactory, proxy: ForwardingProxy
) -> None:
    client = make_client(env={"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"})
    await client.get_runner_group_by_name("default")
    assert proxy.requests == []
    assert actions.state.count() == 3


async def test_explicit_proxy_settings(
    actions: ActionsEmulator, make_client: ClientFactory, proxy: ForwardingProxy
) -> None:
    client = make_client(proxy=ProxySettings(http_proxy=proxy.url), env={"NO_PROXY": "*"})
    await client.get_runner_group_by_name("default")
    assert len(proxy.requests) == actions.state.count()


async def test_https_through_connect_tunnel(
    tls_actions: ActionsEmulator, make_client: ClientFactory, proxy: ForwardingProxy
) -> None:
    client = make_client(
        config_url=tls_actions.config_url(),
        credentials=PersonalAccessToken(tls_actions.add_pat()),
        root_ca_pem=_ca(tls_actions),
        env={"HTTPS_PROXY": proxy.url},
    )
    await client.get_runner_group_by_name("default")
    authority = urlsplit(tls_actions.url).netloc
    assert proxy.requests
    assert set(proxy.requests) == {("CONNECT", authority)}
    assert tls_actions.state.count() == 3


async def test_untrusted_server_fails_without_retry(
    tls_actions: ActionsEmulator, make_client: ClientFactory, sleeps: RecordedSleeps
) -> None:
    client = make_client(
        config_url=tls_actions.config_url(),
        credentials=PersonalAccessToken(tls_actions.add_pat()),
    )
    with pytest.raises(ActionsConnectionError, match="after 1 attempt") as caught:
        await client.get_runner_group_by_name("default")
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorCertificateError)
    assert sleeps.waits == []
    assert tls_actions.state.count() == 0


@pytest.mark.parametrize("as_text", [False, True])
async def test_custom_root_ca_is_trusted(
    tls_actions: ActionsEmulator, make_client: ClientFactory, as_text: bool
) -> None:
    ca = _ca(tls_actions)
    client = make_client(
        config_url=tls_actions.config_url(),
        credentials=PersonalAccessToken(tls_actions.add_pat()),
        root_ca_pem=ca.decode() if as_text else ca,
    )
    group = await client.get_runner_group_by_name("default")
    assert group.id == 1


async def test_bundle_with_only_the_server_certificate_is_trusted(
    tls_actions: ActionsEmulator, make_client: ClientFactory
) -> None:
    address = urlsplit(tls_actions.url)
    assert address.hostname is not None
    assert address.port is not None
    leaf = await asyncio.to_thread(ssl.get_server_certificate, (address.hostname, address.port))
    client = make_client(
        config_url=tls_actions.config_url(),
        credentials=PersonalAccessToken(tls_actions.add_pat()),
        root_ca_pem=leaf,
    )
    group = await client.get_runner_group_by_name("default")
    assert group.id == 1
