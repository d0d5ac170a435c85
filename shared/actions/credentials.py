"""Credentials for the GitHub side of the token chain: a PAT or a GitHub App installation."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shared.actions.errors import InvalidCredentials
from shared.wire import DecodeError, decode_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

# PyJWT and cryptography are imported by GitHubApp alone: together they are about 9 MB of a
# process's memory, which a PAT never needs (docs/listener.md#memory).

APP_JWT_BACKDATE = 60
"""Seconds the App JWT's `iat` is set in the past, to tolerate clock skew with GitHub."""
APP_JWT_LIFETIME = 9 * 60
"""Seconds from `iat` to `exp`; GitHub rejects App JWTs valid for more than ten minutes."""


@dataclass(frozen=True, slots=True)
class PersonalAccessToken:
    """A classic or fine-grained PAT allowed to create runner registration tokens."""

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.token.strip():
            raise InvalidCredentials("the personal access token is empty")


@dataclass(frozen=True, slots=True)
class GitHubApp:
    """A GitHub App installation: App ID (or client ID), installation ID and its PEM private key.

    The key may be PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8 (`PRIVATE KEY`); it is parsed once here so
    a bad key stops the process at start.
    """

    client_id: str
    installation_id: int
    private_key: str = field(repr=False)
    _key: RSAPrivateKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not str(self.client_id).strip():
            raise InvalidCredentials("the GitHub App ID (or client ID) is empty")
        if self.installation_id <= 0:
            raise InvalidCredentials("the GitHub App installation ID must be a positive integer")
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(self.private_key.encode(), password=None)
        except (ValueError, TypeError) as exc:
            # The parser's message never quotes the key, but keep only its class to be sure.
            raise InvalidCredentials(
                f"the GitHub App private key is not a readable PEM key ({type(exc).__name__})"
            ) from None
        if not isinstance(key, RSAPrivateKey):
            raise InvalidCredentials("the GitHub App private key is not an RSA key")
        object.__setattr__(self, "_key", key)

    def jwt(self, *, now: float) -> str:
        """An RS256 App JWT: `iat` = now - 60 s, `exp` = `iat` + 9 min, `iss` = the App ID."""
        issued = int(now) - APP_JWT_BACKDATE
        claims = {"iat": issued, "exp": issued + APP_JWT_LIFETIME, "iss": str(self.client_id)}
        import jwt

        return jwt.encode(claims, self._key, algorithm="RS256")


Credentials = PersonalAccessToken | GitHubApp


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT read without verifying it, or None when it has none.

    Unverified, a JWT's claims are base64url JSON between its two dots; read here without a JWT
    library, which would bring cryptography along for a PAT's tokens.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        # The token came in a response, under the transport's cap.
        claims = decode_json(raw, limit=len(raw), what="the token's claims")
    except (binascii.Error, DecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
