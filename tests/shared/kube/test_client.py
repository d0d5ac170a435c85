"""The ApiClient the controller builds: no per-request environment lookups, the proxy resolved
once from HTTPS_PROXY/HTTP_PROXY and NO_PROXY."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.kube.emulator import KubeEmulator
from shared.kube.client import environment_proxy, load_configuration, new_api_client
from shared.kube.objects import CONFIG_MAP, Objects
from shared.telemetry.logs import REDACTED, redact

PROXY = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("host", "environ", "proxy"),
    [
        ("https://10.0.0.1:443", {}, None),
        ("https://10.0.0.1:443", {"HTTPS_PROXY": PROXY}, PROXY),
        ("https://10.0.0.1:443", {"https_proxy": PROXY}, PROXY),
        ("https://10.0.0.1:443", {"HTTP_PROXY": PROXY}, None),
        ("http://127.0.0.1:8080", {"HTTP_PROXY": PROXY}, PROXY),
        ("https://10.0.0.1:443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.1"}, None),
        ("https://10.0.0.1:443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.0.0.1:443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.1:6443"}, PROXY),
        ("https://10.0.0.1:443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.1:443"}, None),
        ("https://api.k8s.local", {"HTTPS_PROXY": PROXY, "no_proxy": ".k8s.local"}, None),
        ("https://api.k8s.local", {"HTTPS_PROXY": PROXY, "NO_PROXY": "k8s.local"}, None),
        ("https://api.k8s.local", {"HTTPS_PROXY": PROXY, "NO_PROXY": "other.local"}, PROXY),
        ("https://api.k8s.local", {"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}, None),
    ],
)
def test_the_environment_proxy_follows_client_go_variables(
    host: str, environ: dict[str, str], proxy: str | None
) -> None:
    assert environment_proxy(host, environ) == proxy


async def test_the_client_works_without_trusting_the_environment(
    kube: KubeEmulator, ns: str
) -> None:
    cfg = await kube.configuration()
    api = new_api_client(
        cfg, user_agent="some-tool/1.0", environ={"HTTPS_PROXY": PROXY, "NO_PROXY": "127.0.0.1"}
    )
    async with api:
        assert api.rest_client.pool_manager.trust_env is False
        assert api.rest_client.proxy is None
        objects = Objects(api, timeout=5.0)
        await objects.create(CONFIG_MAP, ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
        made = await objects.get(CONFIG_MAP, ns, "c")
        assert made["metadata"]["name"] == "c"
        # The User-Agent goes out instead of the generator's: the server names the writer after it.
        assert [e["manager"] for e in made["metadata"]["managedFields"]] == ["some-tool"]


async def test_the_proxy_is_resolved_once_into_the_configuration(kube: KubeEmulator) -> None:
    cfg = await kube.configuration()
    async with new_api_client(cfg, user_agent="test/0", environ={"HTTP_PROXY": PROXY}) as api:
        assert cfg.proxy == PROXY
        assert api.rest_client.proxy == PROXY


async def test_the_kubeconfig_token_is_masked_in_logs(
    kube: KubeEmulator, ns: str, tmp_path: Path
) -> None:
    """The emulator's tokens are opaque (no JWT shape): only masking keeps them out of logs."""
    token = kube.user_token("reader", groups=["system:masters"])
    path = tmp_path / "kubeconfig"
    kube.write_kubeconfig(path, token=token)
    cfg = await load_configuration(str(path))
    async with new_api_client(cfg, user_agent="test/0") as api:
        await Objects(api, timeout=5.0).list(CONFIG_MAP, ns)
    assert redact(f"sent {token}") == f"sent {REDACTED}"
