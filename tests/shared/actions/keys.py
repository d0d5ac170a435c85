"""RSA keys generated once per test session, in both PEM encodings the App flow accepts."""

from __future__ import annotations

from functools import cache

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@cache
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(fmt: serialization.PrivateFormat) -> str:
    return (
        rsa_key()
        .private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())
        .decode()
    )


def public_pem() -> str:
    return (
        rsa_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
