"""One reader of a GitHub config Secret for both the client pool and the listener's config, and
one refusal of Key Vault credentials (docs/autoscaling.md#autoscalinglistener)."""

from __future__ import annotations

import base64

import pytest

from controller.github.clients import ActionsClients, GitHubConfigError
from controller.github.credentials import (
    REASON_VAULT_NOT_SUPPORTED,
    VAULT_NOT_SUPPORTED,
    secret_credentials,
    vault_refusal,
)
from shared.telemetry.logs import REDACTED, redact
from shared.typedefs import JSONDict
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions


def secret(**data: str) -> JSONDict:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


APP = {
    "github_app_id": "12",
    "github_app_installation_id": "34",
    "github_app_private_key": "-----BEGIN RSA PRIVATE KEY-----\nk\n-----END RSA PRIVATE KEY-----",
}


@pytest.mark.parametrize(
    ("data", "keys"),
    [
        pytest.param({"github_token": "ghp_only"}, {"github_token": "ghp_only"}, id="token"),
        pytest.param(
            {"github_token": "ghp_both", **APP},
            {"github_token": "ghp_both"},
            id="token-wins-arcs-tidy",
        ),
        pytest.param(APP, {"github_token": "", **APP}, id="app"),
        pytest.param(
            {},
            {
                "github_token": "",
                "github_app_id": "",
                "github_app_installation_id": "",
                "github_app_private_key": "",
            },
            id="empty-left-to-the-listener-check",
        ),
    ],
)
def test_the_listener_config_keys_are_arcs(data: dict[str, str], keys: dict[str, str]) -> None:
    assert secret_credentials(secret(**data)).config_keys() == keys


def test_what_is_read_is_redacted_and_never_printed() -> None:
    token = "opaque-token-of-no-known-shape-1234"
    read = secret_credentials(secret(github_token=token, github_app_private_key="private-k3y-0f-x"))
    assert redact(f"sent {token}") == f"sent {REDACTED}"
    assert token not in repr(read)
    assert "private-k3y-0f-x" not in repr(read)


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"vaultConfig": {"type": "azure_key_vault"}}, True),
        ({"vaultConfig": {"type": ""}}, False),
        ({"vaultConfig": None}, False),
        ({}, False),
    ],
)
def test_vault_is_refused_when_a_type_is_set(spec: JSONDict, refused: bool) -> None:
    assert vault_refusal(spec) == (VAULT_NOT_SUPPORTED if refused else None)


@pytest.mark.parametrize("rig_options", [RigOptions(controllers=(), kubelet=False)])
async def test_the_client_pool_refuses_vault_before_reading_the_secret(rig: Rig) -> None:
    spec = {
        "githubConfigUrl": rig.config_url,
        "githubConfigSecret": "github-secret",
        "vaultConfig": {"type": "azure_key_vault"},
    }
    clients = ActionsClients(objects=rig.manager.objects)
    before = len(rig.kube.requests.log)
    with pytest.raises(GitHubConfigError) as caught:
        await clients.for_spec(rig.namespace, spec)
    assert (caught.value.reason, caught.value.message) == (
        REASON_VAULT_NOT_SUPPORTED,
        VAULT_NOT_SUPPORTED,
    )
    assert [r for r in rig.kube.requests.log[before:] if r.user == CONTROLLER_USER] == []
