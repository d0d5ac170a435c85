"""Redaction, the loggers' levels and uncaught exceptions (shared/telemetry/logs.py)."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from sandbox.kube.emulator import KubeEmulator
from shared.telemetry.logs import (
    OMITTED,
    PROJECT_LOGGERS,
    REDACTED,
    JsonFormatter,
    RedactingFilter,
    ZapJsonFormatter,
    configure_logging,
    mask,
    redact,
)

SECRETS = [
    "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJydW5uZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    # An encoded JIT config: base64 of a JSON object of base64-encoded runner files.
    base64.b64encode(
        json.dumps(
            {
                name: base64.b64encode(json.dumps({"file": name, "n": 1}).encode()).decode()
                for name in (".runner", ".credentials", ".credentials_rsaparams")
            }
        ).encode()
    ).decode(),
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
    assert json.loads(line)["msg"] == "token [REDACTED]"


def record_at(level: int, *, exc: bool = False) -> logging.LogRecord:
    record = logging.LogRecord(
        "listener.scaler",
        level,
        "/app/listener/scaler.py",
        42,
        "scaled to %d",
        (3,),
        None,
        func="scale",
    )
    record.created, record.msecs = 1767225600.25, 250.0  # 2026-01-01T00:00:00.250Z
    record.scale_set = "arc"
    if exc:
        try:
            raise RuntimeError(f"patch failed {SECRETS[0]}")
        except RuntimeError as error:
            record.exc_info = (type(error), error, error.__traceback__)
    assert RedactingFilter().filter(record)
    return record


LEVELS = [logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL]


def test_json_has_the_keys_and_levels_of_arcs_listener() -> None:
    """ARC's listener logs with Go's slog.JSONHandler (AddSource): time, level, source, msg.
    Before: time, level (lower case), logger, message, exception."""
    lines = [json.loads(JsonFormatter().format(record_at(level))) for level in LEVELS]
    assert [line["level"] for line in lines] == ["DEBUG", "INFO", "WARN", "ERROR", "ERROR"]
    # Not ARC's: the level as log pipelines read a line's severity (Cloud Logging's names), so
    # that a pipeline without a parser for slog's `level` does not take every line for an error.
    assert [line["severity"] for line in lines] == [
        "DEBUG",
        "INFO",
        "WARNING",
        "ERROR",
        "CRITICAL",
    ]
    assert lines[1] == {
        "time": "2026-01-01T00:00:00.250Z",
        "level": "INFO",
        "source": {"function": "scale", "file": "/app/listener/scaler.py", "line": 42},
        "msg": "scaled to 3",
        "logger": "listener.scaler",
        "severity": "INFO",
        "scale_set": "arc",
    }
    assert list(lines[1])[:4] == ["time", "level", "source", "msg"]


def test_json_has_the_keys_and_levels_of_arcs_controller() -> None:
    """ARC's controller logs with zap as controller-runtime configures it, with ARC's key
    names: severity, ts (RFC 3339 seconds), logger, message."""
    lines = [json.loads(ZapJsonFormatter().format(record_at(level))) for level in LEVELS]
    assert [line["severity"] for line in lines] == ["debug", "info", "warn", "error", "error"]
    assert lines[1] == {
        "severity": "info",
        "ts": "2026-01-01T00:00:00Z",
        "logger": "listener.scaler",
        "message": "scaled to 3",
        "scale_set": "arc",
    }
    assert list(lines[1])[:4] == ["severity", "ts", "logger", "message"]


@pytest.mark.parametrize("formatter", [JsonFormatter(), ZapJsonFormatter()])
def test_an_exception_is_its_error_and_a_redacted_stacktrace(formatter: JsonFormatter) -> None:
    line = formatter.format(record_at(logging.ERROR, exc=True))
    assert SECRETS[0] not in line
    record = json.loads(line)
    assert record["error"] == f"RuntimeError: patch failed {REDACTED}"
    assert record["stacktrace"].startswith("Traceback (most recent call last):")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure_logging changes the process's logging: put it back after the test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in PROJECT_LOGGERS}
    hooks = sys.excepthook, threading.excepthook
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, project_level in levels.items():
        logging.getLogger(name).setLevel(project_level)
    sys.excepthook, threading.excepthook = hooks


@pytest.mark.parametrize("library_level", ["INFO", "DEBUG"])
async def test_kubernetes_response_bodies_never_reach_the_log(
    kube: KubeEmulator,
    ns: str,
    capsys: pytest.CaptureFixture[str],
    restore_logging: None,
    library_level: str,
) -> None:
    """kubernetes-asyncio logs every response body it reads at DEBUG. Before: ARC's default
    `log_level: debug` turned that on, whole objects included."""
    planted = f"planted-{uuid.uuid4().hex}"
    configure_logging(level="DEBUG", library_level=library_level)
    async with client.ApiClient(await kube.configuration()) as api:
        core = client.CoreV1Api(api)
        await core.create_namespaced_config_map(
            ns, {"metadata": {"name": "c"}, "data": {"planted": planted}}
        )
        read = await core.read_namespaced_config_map("c", ns)
    assert read.data == {"planted": planted}
    logging.getLogger("shared.kube").debug("read configmap %s", read.metadata.name)
    err = capsys.readouterr().err
    assert planted not in err
    assert "DEBUG shared.kube: read configmap c" in err
    if library_level == "DEBUG":
        assert f"kubernetes_asyncio.client.rest: response body: {OMITTED}" in err


def test_masked_values_of_any_shape_are_redacted() -> None:
    opaque = f"opaque-{uuid.uuid4().hex}"
    mask(opaque, "short")
    assert redact(f"token is {opaque}.") == f"token is {REDACTED}."
    assert redact("a short word") == "a short word"


UNCAUGHT = """
import asyncio, sys, threading
from shared.telemetry.logs import configure_logging, mask

configure_logging(fmt=sys.argv[1])
opaque, shaped = sys.argv[2], sys.argv[3]
mask(opaque)
loop = asyncio.new_event_loop()
loop.call_exception_handler(
    {"message": "task failed", "exception": RuntimeError(f"loop {opaque} {shaped}")}
)
thread = threading.Thread(target=lambda: (_ for _ in ()).throw(RuntimeError(f"thread {opaque}")))
thread.start()
thread.join()
raise RuntimeError(f"main {opaque} {shaped}")
"""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_uncaught_exceptions_are_logged_redacted(fmt: str) -> None:
    """Before: Python printed the main thread's and other threads' tracebacks raw to stderr."""
    opaque = f"opaque-{uuid.uuid4().hex}"
    shaped = SECRETS[0]
    done = subprocess.run(
        [sys.executable, "-c", UNCAUGHT, fmt, opaque, shaped],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 1
    for where in ("loop", "thread", "main"):
        assert f"{where} {REDACTED}" in done.stderr
    assert opaque not in done.stderr
    assert shaped not in done.stderr
    if fmt == "json":
        records = [json.loads(line) for line in done.stderr.splitlines()]
        assert [r["level"] for r in records] == ["ERROR", "ERROR", "ERROR"]
        assert records[1]["msg"].startswith("uncaught exception in thread ")
        assert records[2]["msg"] == "uncaught exception"
