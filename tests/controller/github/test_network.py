"""A runner spec's proxy and GitHub server TLS reach the controller's Actions calls
(docs/reconcilers.md#proxy-and-tls; ARC's scenarios: docs/reconcilers.md#arcs-test-scenarios)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from sandbox.actions.emulator import ActionsEmulator
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions, open_rig
from tests.shared.actions.proxy import ForwardingProxy

BASIC_TEST_PASSWORD = "Basic " + base64.b64encode(b"test:password").decode()


@pytest.fixture
async def proxy() -> AsyncIterator[ForwardingProxy]:
    async with ForwardingProxy() as running:
        yield running


def credentials(rig: Rig) -> None:
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "proxy-credentials", "namespace": rig.namespace},
            "stringData": {"username": "test", "password": "password"},
        }
    )


def proxied_paths(proxy: ForwardingProxy, method: str) -> list[str]:
    return [urlsplit(target).path for verb, target in proxy.requests if verb == method]


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=False)]
)
async def test_registration_goes_through_the_spec_proxy(rig: Rig, proxy: ForwardingProxy) -> None:
    credentials(rig)
    spec = {"http": {"url": proxy.url, "credentialSecretRef": "proxy-credentials"}}
    await rig.create_runner(proxy=spec)
    await rig.registered(1)
    assert any(p.endswith("/generatejitconfig") for p in proxied_paths(proxy, "POST"))
    assert set(proxy.authorizations) == {BASIC_TEST_PASSWORD}


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunnerset",), kubelet=False)]
)
async def test_scale_down_removal_goes_through_the_spec_proxy(
    rig: Rig, proxy: ForwardingProxy
) -> None:
    credentials(rig)
    await rig.create_runner_set(
        replicas=1,
        proxy={"http": {"url": proxy.url, "credentialSecretRef": "proxy-credentials"}},
    )
    [runner] = await rig.count_runners(1)
    await rig.set_status(runner["metadata"]["name"], phase="Pending", runnerId=100)
    await rig.settle()
    await rig.scale(0, 0)

    async def removed() -> bool:
        return any(p.endswith("/agents/100") for p in proxied_paths(proxy, "DELETE"))

    await rig.until(removed, what="DELETE agents/100 through the proxy")
    assert set(proxy.authorizations) == {BASIC_TEST_PASSWORD}


async def test_registration_trusts_the_github_server_tls_configmap() -> None:
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    async with (
        ActionsEmulator(tls=True, long_poll_timeout=0.5) as gh,
        open_rig(
            RigOptions(controllers=("ephemeralrunner",), kubelet=False),
            namespace=namespace,
            actions=gh,
        ) as rig,
    ):
        assert gh.ca_pem is not None
        rig.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "github-ca", "namespace": namespace},
                "data": {"rootCA.crt": gh.ca_pem.decode()},
            }
        )
        tls = {"certificateFrom": {"configMapKeyRef": {"name": "github-ca", "key": "rootCA.crt"}}}
        assert rig.config_url.startswith("https://")
        await rig.create_runner(githubServerTLS=tls)
        [runner] = await rig.registered(1)
        assert runner["status"]["runnerId"] in gh.state.runners


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=False)]
)
@pytest.mark.parametrize(
    "extra",
    [
        {"proxy": {"http": {"url": "http://proxy:3128", "credentialSecretRef": "absent"}}},
        {
            "githubServerTLS": {
                "certificateFrom": {"configMapKeyRef": {"name": "absent", "key": "ca.crt"}}
            }
        },
    ],
    ids=["proxy-secret", "ca-configmap"],
)
async def test_missing_proxy_secret_or_ca_configmap_fails_the_runner(
    rig: Rig, extra: JSONDict
) -> None:
    """docs/reconcilers.md#registration-failures: a human must create the object first."""
    created = await rig.create_runner(**extra)

    async def failed() -> JSONDict | None:
        runner = await rig.runner(created["metadata"]["name"])
        status = (runner or {}).get("status") or {}
        return status if status.get("phase") == "Failed" else None

    status = await rig.until(failed, what="the runner Failed")
    assert status["reason"] == "GitHubNetworkConfigInvalid"
    assert '"absent" not found' in status["message"]
