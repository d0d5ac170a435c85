"""Malformed requests are answered with a 4xx Status, never a 500."""

from __future__ import annotations

import aiohttp
import pytest

from sandbox.kube import KubeEmulator
from tests.sandbox.kube.conftest import TIMEOUT

CM = "/api/v1/namespaces/default/configmaps"
W = "/apis/test.example.com/v1/namespaces/default/widgets"
PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.mark.usefixtures("widgets")
@pytest.mark.parametrize(
    ("method", "path", "ctype", "body", "code"),
    [
        ("POST", CM, "application/json", b"[1, 2]", 400),
        ("POST", CM, "application/json", b"{", 400),
        ("POST", CM, "application/json", b'{"metadata": 3}', 400),
        ("POST", CM, "application/json", b'{"metadata": {"name": "UPPER"}}', 422),
        ("POST", CM, "application/json", b'{"kind": "Secret", "metadata": {"name": "x"}}', 400),
        ("POST", CM, "application/json", b'{"metadata": {"name": "x", "labels": {"a": 1}}}', 422),
        ("POST", CM, PROTOBUF, b"garbage", 400),
        ("POST", CM, PROTOBUF, b"k8s\x00\x0a\xff", 400),
        ("PUT", CM + "/x", "application/json", b'{"metadata": {"name": "y"}}', 400),
        ("PATCH", W + "/nope", "application/merge-patch+json", b"{}", 404),
        ("PATCH", CM + "/kube-root-ca.crt", "text/plain", b"{}", 415),
        ("PATCH", CM + "/kube-root-ca.crt", "application/merge-patch+json", b"{", 400),
        (
            "PATCH",
            CM + "/kube-root-ca.crt",
            "application/json-patch+json",
            b'[{"op": "add", "path": "/metadata/name", "value": "other"}]',
            400,
        ),
        (
            "PATCH",
            CM + "/kube-root-ca.crt",
            "application/merge-patch+json",
            b'{"metadata": null}',
            400,
        ),
        ("GET", CM + "?limit=x", "", b"", 400),
        ("GET", CM + "?watch=1&resourceVersion=abc", "", b"", 400),
        ("GET", CM + "?watch=1&timeoutSeconds=soon", "", b"", 400),
        ("GET", CM + "?continue=%%%", "", b"", 400),
        ("GET", CM + "?continue=abc&resourceVersion=5", "", b"", 400),
        ("GET", CM + "?fieldSelector=data.x%3D1", "", b"", 400),
        ("GET", "/api/v1/namespaces/default/configmaps/a/b/c", "", b"", 404),
        ("GET", "/apis/test.example.com/v1/widgets/x", "", b"", 404),
        ("GET", "/api/v1/nodes/x/status/extra", "", b"", 404),
        (
            "DELETE",
            CM + "/kube-root-ca.crt",
            "application/json",
            b'{"propagationPolicy": "Sideways"}',
            422,
        ),
        ("DELETE", CM + "/kube-root-ca.crt", "application/json", b"{", 400),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "application/json",
            b'{"spec": {}}',
            400,
        ),
        ("GET", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "", b"", 405),
        (
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/ghost/token",
            "application/json",
            b"{}",
            404,
        ),
        ("PUT", "/api/v1/namespaces/default/pods/p/status", "application/json", b"{}", 404),
    ],
)
async def test_malformed_request_is_a_client_error(
    kube: KubeEmulator, method: str, path: str, ctype: str, body: bytes, code: int
) -> None:
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    if ctype:
        headers["Content-Type"] = ctype
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            kube.url + path,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        ) as resp,
    ):
        status = await resp.json()
    assert (resp.status, status["code"]) == (code, code)
