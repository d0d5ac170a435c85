"""GitHub credentials from the config Secret (docs/reconcilers.md#github-credentials), and
removals kept apart per GitHub configuration."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controller.github.clients import credentials_from_secret, default_factory
from sandbox.actions.emulator import ActionsEmulator
from shared.actions.credentials import GitHubApp, PersonalAccessToken
from shared.actions.errors import InvalidCredentials
from shared.api.kinds import EPHEMERAL_RUNNER
from tests.controller.conftest import Rig, RigOptions


def secret(**data: str) -> dict[str, object]:
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def test_token() -> None:
    assert credentials_from_secret(secret(github_token="ghp_x")) == PersonalAccessToken("ghp_x")


def test_app() -> None:
    creds = credentials_from_secret(
        secret(github_app_id="12", github_app_installation_id="34", github_app_private_key=pem())
    )
    assert isinstance(creds, GitHubApp)
    assert (creds.client_id, creds.installation_id) == ("12", 34)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "needs github_token"),
        ({"github_app_id": "12", "github_app_installation_id": "34"}, "needs github_token"),
        (
            {
                "github_token": "t",
                "github_app_id": "1",
                "github_app_installation_id": "2",
                "github_app_private_key": "k",
            },
            "both PAT and GitHub App",
        ),
        (
            {
                "github_app_id": "1",
                "github_app_installation_id": "two",
                "github_app_private_key": "k",
            },
            "not an integer",
        ),
    ],
)
def test_bad_secret_says_what_to_fix(data: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidCredentials, match=message):
        credentials_from_secret(secret(**data))


@pytest.mark.parametrize(
    "rig_options", [RigOptions(controllers=("ephemeralrunner",), kubelet=False)]
)
async def test_same_runner_id_on_two_github_configurations_is_removed_from_each(
    rig: Rig,
) -> None:
    """Two GitHub hosts number their runners independently. Runner 1 of the first host is
    unregistered and stays (`Outdated`); deleting runner 1 of the second host must still remove
    it there (the memory of removed runners once held runner ids alone and skipped it)."""
    async with ActionsEmulator() as other:
        scale_set = other.state.create_scale_set(
            name="arc", runner_group_id=1, labels=[], runner_setting={}
        )
        token = other.add_pat()
        rig.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "other-secret", "namespace": rig.namespace},
                "data": {"github_token": base64.b64encode(token.encode()).decode()},
            }
        )
        await rig.create_runner(name="first")
        await rig.create_runner(
            name="second",
            githubConfigUrl=other.config_url("owner", "repo"),
            githubConfigSecret="other-secret",
            runnerScaleSetId=scale_set.id,
        )
        ids = {r["metadata"]["name"]: r["status"]["runnerId"] for r in await rig.registered(2)}
        assert ids["first"] == ids["second"]
        rid = ids["first"]
        await rig.until(lambda: rig.pod("first"), what="pod of the first runner")
        await rig.pod_status(
            "first",
            {"containerStatuses": [{"name": "runner", "state": {"terminated": {"exitCode": 7}}}]},
        )

        async def outdated() -> bool:
            runner = await rig.runner("first")
            return ((runner or {}).get("status") or {}).get("phase") == "Outdated"

        await rig.until(outdated, what="the first runner Outdated")
        assert rid not in rig.gh.state.runners
        await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, "second")

        async def second_gone() -> bool:
            return await rig.runner("second") is None

        await rig.until(second_gone, what="the second runner deleted")
        assert rid not in other.state.runners


async def test_the_controllers_user_agent_is_arcs_controllers(actions: ActionsEmulator) -> None:
    """ARC's controller sends subsystem `gha-scale-set-controller`
    (docs/actions-client.md#user-agent)."""
    client = default_factory(
        actions.config_url(),
        PersonalAccessToken(actions.add_pat()),
        proxy=None,
        root_ca_pem=None,
    )
    try:
        await client.get_runner_group_by_name("default")
    finally:
        await client.aclose()
    agents = [json.loads(r.headers["User-Agent"]) for r in actions.state.requests]
    assert {agent["subsystem"] for agent in agents} == {"gha-scale-set-controller"}
    assert {agent["system"] for agent in agents} == {"gha-runner-scaler"}
