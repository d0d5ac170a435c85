"""Credentials the emulator issues and checks: PATs, GitHub Apps, and the tokens of the auth chain.

Every token is random and recorded with its expiry, so the emulator can expire or revoke any of
them on demand (fault injection) without the client noticing anything but the 401.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

TokenKind = Literal["installation", "registration", "admin", "message_queue"]
TOKEN_KINDS: tuple[TokenKind, ...] = ("installation", "registration", "admin", "message_queue")

# GitHub accepts App JWTs whose clock is slightly off; the clients backdate `iat` by 60 s.
APP_JWT_LEEWAY = 60.0
# GitHub refuses App JWTs that live longer than 10 minutes.
APP_JWT_MAX_LIFETIME = 600.0


@dataclass(frozen=True)
class AppCredentials:
    """What a user pastes into a listener config for GitHub App authentication."""

    app_id: str
    installation_id: int
    private_key_pem: str
    client_id: str = ""


@dataclass
class IssuedToken:
    kind: TokenKind
    expires_at: float
    scope: str = ""
    session_id: str = ""


@dataclass
class _App:
    credentials: AppCredentials
    public_key: rsa.RSAPublicKey


def generate_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@cache
def service_signing_key() -> rsa.RSAPrivateKey:
    """One key per process signs every admin token: RSA key generation is the slow part."""
    return generate_rsa_key()


def private_key_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


class InvalidCredentials(Exception):
    """A token or JWT was refused; the message says why without quoting the credential."""


class UnknownInstallation(InvalidCredentials):
    """A valid App JWT named an installation that App does not have (GitHub answers 404)."""


@dataclass
class CredentialStore:
    """PATs, Apps and every token the emulator handed out."""

    installation_token_ttl: float = 3600.0
    registration_token_ttl: float = 3600.0
    admin_token_ttl: float = 3600.0
    message_queue_token_ttl: float = 3600.0
    pats: set[str] = field(default_factory=set)
    apps: dict[str, _App] = field(default_factory=dict)
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    _next_app_id: int = 1000
    _next_installation_id: int = 5000

    def add_pat(self) -> str:
        pat = "ghp_" + secrets.token_hex(18)
        self.pats.add(pat)
        return pat

    def add_app(self, key: rsa.RSAPrivateKey | None = None) -> AppCredentials:
        key = key or generate_rsa_key()
        self._next_app_id += 1
        self._next_installation_id += 1
        credentials = AppCredentials(
            app_id=str(self._next_app_id),
            installation_id=self._next_installation_id,
            private_key_pem=private_key_pem(key),
            client_id="Iv1." + secrets.token_hex(8),
        )
        self.apps[credentials.app_id] = _App(credentials, key.public_key())
        return credentials

    def issue(
        self,
        kind: TokenKind,
        *,
        ttl: float,
        prefix: str = "",
        scope: str = "",
        session_id: str = "",
    ) -> str:
        token = prefix + secrets.token_urlsafe(30)
        self.tokens[token] = IssuedToken(
            kind=kind, expires_at=time.time() + ttl, scope=scope, session_id=session_id
        )
        return token

    def issue_admin_token(self, *, scope: str) -> tuple[str, float]:
        """An RS256 JWT carrying `exp` (clients read it unverified to schedule the refresh)."""
        now = time.time()
        expires_at = now + self.admin_token_ttl
        token = jwt.encode(
            {
                "iat": int(now),
                "nbf": int(now),
                "exp": int(expires_at),
                "iss": "sandbox-actions",
                "aud": "actions-service",
                "scp": scope,
                "jti": secrets.token_hex(8),
            },
            service_signing_key(),
            algorithm="RS256",
        )
        self.tokens[token] = IssuedToken(kind="admin", expires_at=expires_at, scope=scope)
        return token, expires_at

    def check(self, token: str, kind: TokenKind) -> IssuedToken:
        issued = self.tokens.get(token)
        if issued is None or issued.kind != kind:
            raise InvalidCredentials(f"unknown {kind} token")
        if issued.expires_at <= time.time():
            raise InvalidCredentials(f"{kind} token expired")
        return issued

    def expire(self, kind: TokenKind | None = None) -> int:
        """Expire every live token of a kind (all kinds when None) now; returns how many."""
        now = time.time()
        count = 0
        for issued in self.tokens.values():
            if (kind is None or issued.kind == kind) and issued.expires_at > now:
                issued.expires_at = now
                count += 1
        return count

    def revoke_session_tokens(self, session_id: str) -> None:
        for token in [t for t, i in self.tokens.items() if i.session_id == session_id]:
            del self.tokens[token]

    def verify_app_jwt(self, token: str, installation_id: int) -> AppCredentials:
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise InvalidCredentials("A JSON web token could not be decoded") from exc
        issuer = str(unverified.get("iss", ""))
        app = self.apps.get(issuer) or next(
            (a for a in self.apps.values() if a.credentials.client_id == issuer), None
        )
        if app is None:
            raise InvalidCredentials("Integration not found")
        try:
            claims = jwt.decode(
                token,
                app.public_key,
                algorithms=["RS256"],
                leeway=APP_JWT_LEEWAY,
                options={"require": ["iat", "exp", "iss"]},
            )
        except jwt.PyJWTError as exc:
            reason = type(exc).__name__
            raise InvalidCredentials(f"The JSON web token was refused ({reason})") from exc
        if float(claims["exp"]) - float(claims["iat"]) > APP_JWT_MAX_LIFETIME:
            raise InvalidCredentials("'Expiration time' claim ('exp') is too far in the future")
        if app.credentials.installation_id != installation_id:
            raise UnknownInstallation("Not Found")
        return app.credentials
