"""The docker-run overlay a user copies out of the checkout (manifests/examples/docker-run/overlay/,
README "Run a listener with docker run"): rendered as the README makes it, with the manifests
linked, its values from listener.env reach every object that names them, and nothing but the
cluster's objects is applied."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from listener.config import ENV_PREFIX, ListenerSettings
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds

ROOT = Path(__file__).parents[2]
OVERLAY = ROOT / "manifests" / "examples" / "docker-run" / "overlay"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def _env(path: Path) -> dict[str, str]:
    """KEY=value lines, as `docker run --env-file` and kustomize's `envs:` read them."""
    values = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def _render(directory: Path) -> list[dict[str, Any]]:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def _copy(tmp_path: Path, *, namespace: str, name: str, url: str) -> Path:
    """README step 2 and a user's step 3: the copy, the link, the PAT, the values filled in."""
    directory = tmp_path / "my-runners"
    shutil.copytree(OVERLAY, directory)
    (directory / "manifests").symlink_to(ROOT / "manifests")
    (directory / "github-token").write_text("ghp_placeholder")
    env = (directory / "listener.env").read_text()
    for key, value in (
        ("EPHEMERAL_RUNNER_SET_NAMESPACE", namespace),
        ("EPHEMERAL_RUNNER_SET_NAME", name),
        ("RUNNER_SCALE_SET_NAME", name),
        ("CONFIGURE_URL", url),
    ):
        old = _env(directory / "listener.env")[ENV_PREFIX + key]
        env = env.replace(f"{ENV_PREFIX}{key}={old}\n", f"{ENV_PREFIX}{key}={value}\n")
    (directory / "listener.env").write_text(env)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text().replace(
            "\nnamespace: arc-runners\n", f"\nnamespace: {namespace}\n"
        )
    )
    return directory


def test_listener_env_holds_listener_settings_and_no_secret() -> None:
    env = _env(OVERLAY / "listener.env")
    keys = {key.removeprefix(ENV_PREFIX).lower() for key in env}
    assert all(key.startswith(ENV_PREFIX) for key in env)
    assert keys <= set(ListenerSettings.key_names())
    assert not {"github_token", "github_app_private_key"} & keys
    assert int(env["LISTENER_MIN_RUNNERS"]) <= int(env["LISTENER_MAX_RUNNERS"])
    # The controller's defaults are 8080 and 8081 (docs/controller-runtime.md).
    assert env["LISTENER_METRICS_ADDR"].rpartition(":")[2] not in {"8080", "8081"}


def test_the_filled_in_values_reach_every_object(tmp_path: Path) -> None:
    """Before: the namespace and the names had to be edited in five places of in-tree files."""
    directory = _copy(tmp_path, namespace="ci-runners", name="ci-set", url="https://github.com/ci")
    objects = _render(directory)
    namespaced = [o for o in objects if o["kind"] != "Namespace"]
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == ["ci-runners"]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"ci-runners"}
    (runner_set,) = [o for o in objects if o["kind"] == "EphemeralRunnerSet"]
    assert runner_set["metadata"]["name"] == "ci-set"
    assert runner_set["spec"]["ephemeralRunnerSpec"]["githubConfigUrl"] == "https://github.com/ci"
    (role,) = [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "gha-listener"
    ]
    (set_rule,) = [r for r in role["rules"] if r["resources"] == ["ephemeralrunnersets"]]
    assert set_rule["resourceNames"] == ["ci-set"]
    (binding,) = [
        o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "gha-listener"
    ]
    assert binding["subjects"][0]["namespace"] == "ci-runners"
    (controller_binding,) = [
        o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "gha-controller"
    ]
    assert controller_binding["subjects"][0]["namespace"] == "gha-runner-scaler-system"


def test_the_overlay_applies_the_secrets_and_not_its_values(tmp_path: Path) -> None:
    directory = _copy(tmp_path, namespace="arc-runners", name="my-runners", url="https://x.test/o")
    objects = _render(directory)
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    # No ServiceAccount token Secret: the listener's token expires (README step 4).
    assert set(secrets) == {"github-config"}
    assert set(secrets["github-config"]["data"]) == {"github_token"}
    assert not [o for o in objects if o["kind"] == "ConfigMap"]


async def test_the_readme_teardown_exits_zero(tmp_path: Path) -> None:
    """README step 7: `kubectl delete -k . --ignore-not-found` exits 0 and takes the namespace."""
    directory = _copy(tmp_path, namespace="arc-runners", name="my-runners", url="https://x.test/o")
    async with KubeEmulator(tls=True) as kube:
        kube.apply_crds(project_crds())
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig)

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), *args],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        applied = await asyncio.to_thread(kubectl, "apply", "-k", str(directory))
        assert applied.returncode == 0, applied.stderr
        deleted = await asyncio.to_thread(
            kubectl, "delete", "-k", str(directory), "--ignore-not-found"
        )
        assert deleted.returncode == 0, deleted.stderr
        left = await asyncio.to_thread(kubectl, "get", "namespace", "arc-runners")
        assert left.returncode == 1
        assert "NotFound" in left.stderr
