from __future__ import annotations

import json
import logging

import pytest

from shared.telemetry.logs import JsonFormatter, RedactingFilter, redact

SECRETS = [
    "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJydW5uZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_redact_removes_secret(secret: str) -> None:
    out = redact(f"before {secret} after")
    assert secret not in out
    assert out.startswith("before ")
    assert out.endswith(" after")


def test_redact_keeps_header_name() -> None:
    assert (
        redact("Authorization: Bearer abcdefghijklmnop1234") == "Authorization: Bearer [REDACTED]"
    )


def test_filter_redacts_arguments_and_exceptions() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "token %s", (SECRETS[0],), None)
    try:
        raise RuntimeError(SECRETS[2])
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert RedactingFilter().filter(record)
    line = JsonFormatter().format(record)
    assert SECRETS[0] not in line
    assert SECRETS[2] not in line
    assert json.loads(line)["message"] == "token [REDACTED]"
