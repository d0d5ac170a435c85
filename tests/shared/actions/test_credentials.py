"""GitHub App JWT building and credential validation."""

from __future__ import annotations

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shared.actions import GitHubApp, InvalidCredentials, PersonalAccessToken
from shared.actions.credentials import token_expiry

from .keys import private_pem, public_pem

NOW = 1_800_000_000


@pytest.mark.parametrize(
    "fmt", [serialization.PrivateFormat.TraditionalOpenSSL, serialization.PrivateFormat.PKCS8]
)
def test_app_jwt_claims(fmt: serialization.PrivateFormat) -> None:
    app = GitHubApp(client_id="12345", installation_id=7, private_key=private_pem(fmt))
    token = app.jwt(now=NOW)
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = jwt.decode(
        token,
        public_pem(),
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False},
    )
    assert claims == {"iat": NOW - 60, "exp": NOW - 60 + 540, "iss": "12345"}


def test_app_jwt_accepts_client_id_string() -> None:
    app = GitHubApp(
        client_id="Iv1.abc123",
        installation_id=1,
        private_key=private_pem(serialization.PrivateFormat.PKCS8),
    )
    claims = jwt.decode(app.jwt(now=NOW), options={"verify_signature": False})
    assert claims["iss"] == "Iv1.abc123"


def _ec_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"client_id": "", "installation_id": 1}, "App ID"),
        ({"client_id": "1", "installation_id": 0}, "installation ID"),
        ({"client_id": "1", "installation_id": -3}, "installation ID"),
    ],
)
def test_app_rejects_missing_fields(kwargs: dict[str, object], match: str) -> None:
    pem = private_pem(serialization.PrivateFormat.PKCS8)
    with pytest.raises(InvalidCredentials, match=match):
        GitHubApp(private_key=pem, **kwargs)  # type: ignore[arg-type]


def test_app_rejects_unreadable_key_without_quoting_it() -> None:
    garbage = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    with pytest.raises(InvalidCredentials, match="not a readable PEM key") as caught:
        GitHubApp(client_id="1", installation_id=1, private_key=garbage)
    assert "bm90IGEga2V5" not in str(caught.value)
    assert caught.value.__cause__ is None


def test_app_rejects_non_rsa_key() -> None:
    with pytest.raises(InvalidCredentials, match="not an RSA key"):
        GitHubApp(client_id="1", installation_id=1, private_key=_ec_pem())


def test_pat_rejects_empty() -> None:
    with pytest.raises(InvalidCredentials, match="empty"):
        PersonalAccessToken(" ")


@pytest.mark.parametrize(
    "credentials",
    [
        PersonalAccessToken("ghp_0123456789abcdefghijklmn"),
        GitHubApp(
            client_id="1",
            installation_id=1,
            private_key=private_pem(serialization.PrivateFormat.PKCS8),
        ),
    ],
)
def test_repr_hides_secrets(credentials: object) -> None:
    text = repr(credentials)
    assert "ghp_" not in text
    assert "PRIVATE KEY" not in text


@pytest.mark.parametrize(
    ("claims", "expiry"),
    [({"exp": NOW}, float(NOW)), ({"exp": 12.5}, 12.5), ({"sub": "x"}, None), ({"exp": "x"}, None)],
)
def test_token_expiry_reads_exp_without_verifying(
    claims: dict[str, object], expiry: float | None
) -> None:
    token = jwt.encode(claims, "some-hmac-secret-of-32-bytes-min!", algorithm="HS256")
    assert token_expiry(token) == expiry


def test_token_expiry_of_opaque_token_is_none() -> None:
    assert token_expiry("not-a-jwt") is None
