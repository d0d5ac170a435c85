"""token_expiry reads a JWT's `exp` without a JWT library (so a PAT's process never imports one)
and agrees with PyJWT's unverified decoding on every token shape."""

from __future__ import annotations

import jwt
import pytest

from shared.actions.credentials import token_expiry


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": 1700000000},
        {"exp": 1700000000.5, "sub": "x" * 7},
        {"sub": "no exp"},
        {"exp": "soon"},
    ],
)
def test_reads_what_pyjwt_reads(claims: dict[str, object]) -> None:
    token = jwt.encode(claims, "k" * 32, algorithm="HS256")
    decoded = jwt.decode(token, options={"verify_signature": False}).get("exp")
    expected = float(decoded) if isinstance(decoded, int | float) else None
    assert token_expiry(token) == expected


@pytest.mark.parametrize(
    "token", ["", "ghp_plainpat", "a.b", "a.!!!.c", "a.bm90IGpzb24.c", "a.W10.c"]
)
def test_anything_else_has_no_expiry(token: str) -> None:
    assert token_expiry(token) is None
