"""The tokens controller: Secrets of type kubernetes.io/service-account-token get a token that
authenticates as their ServiceAccount until the Secret (or the ServiceAccount) is deleted."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import wait_for

TOKEN_TYPE = "kubernetes.io/service-account-token"


def token_secret(name: str, account: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {"kubernetes.io/service-account.name": account, **annotations},
        },
        "type": TOKEN_TYPE,
    }


def stored(kube: KubeEmulator, ns: str, name: str) -> dict[str, Any] | None:
    return kube.store.get(("", "secrets"), ns, name)


async def filled_token(kube: KubeEmulator, ns: str, name: str) -> str:
    secret = await wait_for(lambda: (stored(kube, ns, name) or {}).get("data", {}).get("token"))
    return base64.b64decode(secret).decode()


async def whoami(kube: KubeEmulator, token: str) -> str:
    async with client.ApiClient(await kube.configuration(token=token)) as api:
        review = await client.AuthenticationV1Api(api).create_self_subject_review({})
    return str(review.status.user_info.username)


async def test_the_secret_gets_a_token_of_its_service_account(
    kube: KubeEmulator, ns: str, core: client.CoreV1Api
) -> None:
    account = await core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    await core.create_namespaced_secret(ns, token_secret("robot-token", "robot"))
    token = await filled_token(kube, ns, "robot-token")
    secret = await core.read_namespaced_secret("robot-token", ns)
    assert secret.metadata.annotations["kubernetes.io/service-account.uid"] == account.metadata.uid
    assert base64.b64decode(secret.data["namespace"]).decode() == ns
    assert "ca.crt" in secret.data
    assert await whoami(kube, token) == f"system:serviceaccount:{ns}:robot"


@pytest.mark.parametrize("delete", ["secret", "serviceaccount"])
async def test_deleting_the_secret_or_its_account_revokes_the_token(
    kube: KubeEmulator, ns: str, core: client.CoreV1Api, delete: str
) -> None:
    await core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    await core.create_namespaced_secret(ns, token_secret("robot-token", "robot"))
    token = await filled_token(kube, ns, "robot-token")
    if delete == "secret":
        await core.delete_namespaced_secret("robot-token", ns)
    else:
        await core.delete_namespaced_service_account("robot", ns)
        await wait_for(lambda: stored(kube, ns, "robot-token") is None)
    with pytest.raises(client.ApiException) as refused:
        await whoami(kube, token)
    assert refused.value.status == 401


@pytest.mark.parametrize(
    "annotations", [{}, {"kubernetes.io/service-account.uid": "another-account-of-that-name"}]
)
async def test_a_secret_for_an_account_that_is_not_there_is_deleted(
    kube: KubeEmulator, ns: str, core: client.CoreV1Api, annotations: dict[str, str]
) -> None:
    if annotations:
        await core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    await core.create_namespaced_secret(ns, token_secret("robot-token", "robot", **annotations))
    await wait_for(lambda: stored(kube, ns, "robot-token") is None)


async def test_other_secrets_are_left_alone(
    kube: KubeEmulator, ns: str, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    await core.create_namespaced_secret(
        ns,
        {
            "metadata": {
                "name": "plain",
                "annotations": {"kubernetes.io/service-account.name": "robot"},
            },
            "stringData": {"k": "v"},
        },
    )
    await core.create_namespaced_secret(ns, token_secret("robot-token", "robot"))
    await filled_token(kube, ns, "robot-token")
    plain = await core.read_namespaced_secret("plain", ns)
    assert plain.data == {"k": base64.b64encode(b"v").decode()}
