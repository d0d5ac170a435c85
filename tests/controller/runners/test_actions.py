"""GitHub credentials from the config Secret (docs/reconcilers.md#github-credentials)."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from controller.runners.actions import credentials_from_secret
from shared.actions.credentials import GitHubApp, PersonalAccessToken
from shared.actions.errors import InvalidCredentials


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
