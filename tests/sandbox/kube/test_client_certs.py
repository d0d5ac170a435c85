"""x509 client-certificate authentication, as a kind or kubeadm admin kubeconfig uses it: the
certificate's CN is the user and each O a group; bearer tokens keep working beside it."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.tls import generate
from shared.kube.client import configuration_from_dict
from tests.sandbox.kube.test_kubectl import KUBECTL, Kubectl

ADMIN_GROUPS = ["system:masters", "kubeadm:cluster-admins", "system:authenticated"]


@pytest.fixture
async def tls_kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(tls=True) as kube:
        yield kube


async def test_the_admin_kubeconfig_carries_a_client_certificate(
    tls_kube: KubeEmulator,
) -> None:
    user = tls_kube.kubeconfig_dict()["users"][0]["user"]
    assert "token" not in user
    assert {"client-certificate-data", "client-key-data"} <= user.keys()
    async with client.ApiClient(await tls_kube.configuration()) as api:
        review = await client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        names = [n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items]
    assert review.status.user_info.username == "kubernetes-admin"
    assert review.status.user_info.groups == ADMIN_GROUPS
    assert "kube-system" in names
    assert tls_kube.requests.count(verb="list", resource="namespaces", user="kubernetes-admin") == 1


async def test_a_certificate_user_has_what_rbac_grants_its_groups(
    tls_kube: KubeEmulator,
) -> None:
    cert, key = tls_kube.client_certificate("carol", ["readers"])
    config = tls_kube.kubeconfig_dict()
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    tls_kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "secret-reader"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
        }
    )
    tls_kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "readers"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "secret-reader",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}
            ],
        }
    )
    async with client.ApiClient(await configuration_from_dict(config)) as api:
        core = client.CoreV1Api(api)
        await core.list_namespaced_secret("default")
        with pytest.raises(client.ApiException) as denied:
            await core.list_namespaced_config_map("default")
        review = await client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    assert denied.value.status == 403
    message = json.loads(denied.value.body)["message"]
    assert 'User "carol" cannot list resource "configmaps"' in message
    assert review.status.user_info.username == "carol"
    assert review.status.user_info.groups == ["readers", "system:authenticated"]


async def test_bearer_tokens_and_token_review_work_beside_certificates(
    tls_kube: KubeEmulator,
) -> None:
    sa_token = tls_kube.service_account_token("default", "default")
    async with client.ApiClient(await tls_kube.configuration()) as api:
        reviewed = await client.AuthenticationV1Api(api).create_token_review(
            {"spec": {"token": sa_token}}
        )
    assert reviewed.status.authenticated is True
    assert reviewed.status.user.username == "system:serviceaccount:default:default"
    async with client.ApiClient(await tls_kube.configuration(token=sa_token)) as api:
        review = await client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    assert review.status.user_info.username == "system:serviceaccount:default:default"


async def test_a_certificate_from_another_ca_is_refused(
    tls_kube: KubeEmulator, tmp_path: Path
) -> None:
    stranger = generate()
    cert, key = stranger.client_certificate("mallory", ("system:masters",))
    ca = base64.b64decode(
        tls_kube.kubeconfig_dict()["clusters"][0]["cluster"]["certificate-authority-data"]
    ).decode()
    context = ssl.create_default_context(cadata=ca)
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.get(f"{tls_kube.url}/api/v1/namespaces", ssl=context) as resp:
                await resp.read()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
async def test_kubectl_auth_whoami_shows_the_certificate_user(
    tls_kube: KubeEmulator, tmp_path: Path
) -> None:
    tls_kube.write_kubeconfig(tmp_path / "kubeconfig")
    assert (
        "client-key-data"
        in yaml.safe_load((tmp_path / "kubeconfig").read_text())["users"][0]["user"]
    )
    kubectl = Kubectl(tls_kube, tmp_path / "kubeconfig", tmp_path / "cache")
    whoami = json.loads(await kubectl.ok("auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"] == {"username": "kubernetes-admin", "groups": ADMIN_GROUPS}
    assert "kube-system" in await kubectl.ok("get", "namespaces", "-o", "name")
