"""The light connection (shared.kube.http): kubeconfig and in-cluster loading without
kubernetes-asyncio, and `Objects` over plain aiohttp, against the emulator serving TLS."""

from __future__ import annotations

import base64
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.kube.emulator import KubeEmulator
from shared.kube.errors import Forbidden, KubeError, NotFound
from shared.kube.http import (
    MAX_KUBECONFIG_BYTES,
    Connection,
    ConnectionConfigError,
    HttpApi,
    NeedsClientLibrary,
    from_kubeconfig,
    in_cluster,
    load_connection,
)
from shared.kube.objects import CONFIG_MAP, Kind, Objects
from shared.telemetry.logs import REDACTED, redact

SELF_SUBJECT_REVIEW = Kind(
    "SelfSubjectReview", "selfsubjectreviews", group="authentication.k8s.io", namespaced=False
)


@pytest.fixture
async def tls_kube() -> AsyncIterator[KubeEmulator]:
    async with KubeEmulator(kubelet=False, tls=True) as emulator:
        yield emulator


def write(tmp_path: Path, config: dict[str, Any], name: str = "kubeconfig") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def whoami(connection: Connection) -> str:
    async with HttpApi(connection, user_agent="test/0") as api:
        review = await Objects(api, timeout=5.0).create(
            SELF_SUBJECT_REVIEW,
            None,
            {"apiVersion": SELF_SUBJECT_REVIEW.api_version, "kind": SELF_SUBJECT_REVIEW.kind},
        )
    return str(review["status"]["userInfo"]["username"])


async def test_a_token_and_ca_data_kubeconfig(tls_kube: KubeEmulator, tmp_path: Path) -> None:
    token = tls_kube.user_token("alice")
    path = write(tmp_path, tls_kube.kubeconfig_dict(token=token))
    assert await whoami(from_kubeconfig(path)) == "alice"


async def test_a_client_certificate_kubeconfig(tls_kube: KubeEmulator, tmp_path: Path) -> None:
    admin = tls_kube.kubeconfig_dict()
    assert "client-key-data" in admin["users"][0]["user"]
    assert await whoami(from_kubeconfig(write(tmp_path, admin))) == "kubernetes-admin"


async def test_files_beside_the_kubeconfig_and_a_token_file(
    tls_kube: KubeEmulator, tmp_path: Path
) -> None:
    """Relative paths are the kubeconfig's folder's, as kubectl reads them."""
    config = tls_kube.kubeconfig_dict(token=tls_kube.user_token("bob"))
    cluster = config["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(cluster.pop("certificate-authority-data")))
    cluster["certificate-authority"] = "ca.crt"
    user = config["users"][0]["user"]
    (tmp_path / "token").write_text(user.pop("token") + "\n")
    user["tokenFile"] = "token"
    assert await whoami(from_kubeconfig(write(tmp_path, config))) == "bob"


async def test_an_unknown_ca_is_refused(tls_kube: KubeEmulator, tmp_path: Path) -> None:
    config = tls_kube.kubeconfig_dict(token=tls_kube.user_token("alice"))
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    with pytest.raises(KubeError):
        await whoami(from_kubeconfig(write(tmp_path, config)))


async def test_the_pods_service_account(tls_kube: KubeEmulator, tmp_path: Path) -> None:
    cluster = tls_kube.kubeconfig_dict()["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (tmp_path / "token").write_text(tls_kube.user_token("system:serviceaccount:ns:sa"))
    host, port = cluster["server"].removeprefix("https://").rsplit(":", 1)
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    connection = in_cluster(environ, tmp_path)
    assert await whoami(connection) == "system:serviceaccount:ns:sa"


async def test_errors_map_onto_the_vocabulary(tls_kube: KubeEmulator, tmp_path: Path) -> None:
    path = write(tmp_path, tls_kube.kubeconfig_dict(token=tls_kube.user_token("nobody")))
    async with HttpApi(from_kubeconfig(path), user_agent="test/0") as api:
        objects = Objects(api, timeout=5.0)
        with pytest.raises(Forbidden, match="nobody"):
            await objects.get(CONFIG_MAP, "default", "missing")
    admin = write(tmp_path, tls_kube.kubeconfig_dict(), name="admin")
    async with HttpApi(from_kubeconfig(admin), user_agent="some-tool/1.0") as api:
        objects = Objects(api, timeout=5.0)
        with pytest.raises(NotFound):
            await objects.get(CONFIG_MAP, "default", "missing")
        body = {"metadata": {"name": "made"}, "data": {"a": "1"}}
        await objects.create(CONFIG_MAP, "default", body)
        patched = await objects.patch(CONFIG_MAP, "default", "made", {"data": {"b": "2"}})
        assert patched["data"] == {"a": "1", "b": "2"}
        # Every request carries the User-Agent: the server names the writer after it.
        assert [e["manager"] for e in patched["metadata"]["managedFields"]] == ["some-tool"]


@pytest.mark.parametrize(
    "change",
    [
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}},
        {"auth-provider": {"name": "oidc"}},
    ],
    ids=["exec", "auth-provider"],
)
def test_plugins_need_the_client_library(
    tls_kube: KubeEmulator, tmp_path: Path, change: dict[str, Any]
) -> None:
    config = copy.deepcopy(tls_kube.kubeconfig_dict())
    config["users"][0]["user"] = change
    with pytest.raises(NeedsClientLibrary):
        from_kubeconfig(write(tmp_path, config))


def test_several_kubeconfig_files_need_the_client_library(tmp_path: Path) -> None:
    with pytest.raises(NeedsClientLibrary):
        load_connection(environ={"KUBECONFIG": f"{tmp_path}/a:{tmp_path}/b"})


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"clusters:" + b" [" * 100_000, "is nested too deeply"),
        (b"clusters: [\n  - {name: c\n", "is not valid YAML (line"),
        (b"current-context: \xff\xfe\n", "is not UTF-8 text"),
        (b"# padding\n" * (MAX_KUBECONFIG_BYTES // 10 + 1), "is over the cap of 16.0 MiB"),
    ],
    ids=["nested", "broken", "utf-8", "over-the-cap"],
)
def test_a_hostile_kubeconfig_is_one_line_saying_why(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_bytes(content)
    with pytest.raises(ConnectionConfigError) as caught:
        from_kubeconfig(str(path))
    assert why in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_proxy_password_is_registered_for_redaction(tmp_path: Path) -> None:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    proxy = "http://me:pr0xy%2Fpassw0rd@proxy.corp:3128"
    connection = load_connection(
        write(tmp_path, config), environ={"HTTPS_PROXY": proxy, "NO_PROXY": ""}
    )
    assert connection.proxy == proxy
    assert (
        redact(f"via {proxy} (pr0xy/passw0rd)")
        == f"via http://me:{REDACTED}@proxy.corp:3128 ({REDACTED})"
    )
