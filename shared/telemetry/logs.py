"""Process logging in text or JSON, with secrets redacted before any handler sees them.

Both processes log through `configure_logging`: this project's loggers at the configured level,
every other library's at INFO unless asked otherwise (at DEBUG, kubernetes-asyncio logs every
response body it reads, which holds whole objects, pod templates included). Whatever the levels,
no line carries an API object body, a credential the process registered with `mask`, or anything
shaped like a token or a private key; uncaught exceptions take the same path.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from types import TracebackType
from typing import Literal, TextIO

LogFormat = Literal["text", "json"]

# The loggers of this project's code; everything else is a library.
PROJECT_LOGGERS = ("listener", "controller", "shared")

# Shapes of the secrets this project handles: GitHub tokens (ghp_, ghs_, gho_, github_pat_...),
# JWTs (three base64url segments, which Actions tokens are), encoded JIT configs (base64 of a
# JSON object: "eyI" or "eyJ", no dots, a few kilobytes), PEM private keys, and bearer
# credentials in headers.
_SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"\b(?:gh[opsur]_|github_pat_)[A-Za-z0-9_]{16,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bey[IJ][A-Za-z0-9+/_-]{100,}={0,2}"),
    re.compile(r"(?i)(bearer|token|authorization)([\s:=\"']+)[A-Za-z0-9._~+/=-]{12,}"),
]
REDACTED = "[REDACTED]"
# Shorter values are too likely to occur in ordinary text to be replaced everywhere.
_MIN_MASKED_LENGTH = 8
# Library log calls whose arguments are whole response bodies: kept, with the bodies left out.
_BODY_MESSAGES = {("kubernetes_asyncio.client.rest", "response body: %s")}
OMITTED = "[body omitted]"

_masked: set[str] = set()
_masked_lock = threading.Lock()


def mask(*values: str) -> None:
    """Redact these exact values (credentials of any shape, e.g. an opaque Kubernetes token)
    from every log line from now on."""
    with _masked_lock:
        _masked.update(v for v in values if len(v) >= _MIN_MASKED_LENGTH)


def redact(text: str) -> str:
    """The text with every masked value and secret-shaped substring replaced by [REDACTED]."""
    with _masked_lock:
        masked = sorted(_masked, key=len, reverse=True)
    for value in masked:
        text = text.replace(value, REDACTED)
    for pattern in _SECRET_PATTERNS:
        if pattern.groups >= 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """Renders the message once, redacted, so no formatter can print an argument raw."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.name, record.msg) in _BODY_MESSAGES:
            record.args = None
            record.msg = str(record.msg).replace("%s", OMITTED)
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


JsonShape = Literal["slog", "zap"]
"""Whose JSON lines `json` writes: ARC's listener's (Go's log/slog) or its controller's (zap, as
controller-runtime configures it)."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the keys of ARC's listener, Go's `slog.JSONHandler` with
    `AddSource`: `time` (RFC 3339, milliseconds), `level` (`DEBUG`, `INFO`, `WARN`, `ERROR`),
    `source`, `msg`, then `logger`, `severity`, any `extra` fields, and for an exception
    `error` (its last line) and `stacktrace`.

    `severity` is not ARC's: it is the level in the names log pipelines read as a line's
    severity (Cloud Logging's `LogSeverity`: `DEBUG`, `INFO`, `WARNING`, `ERROR`, `CRITICAL`),
    which slog's `level` is not (docs/listener.md#telemetry)."""

    _STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}
    _LEVELS = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARN"}
    _SEVERITIES = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARNING", "ERROR": "ERROR"}

    def head(self, record: logging.LogRecord) -> dict[str, object]:
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            # slog has no level above ERROR: CRITICAL (an uncaught exception) is ERROR too.
            "level": self._LEVELS.get(record.levelname, "ERROR"),
            "source": {
                "function": record.funcName,
                "file": record.pathname,
                "line": record.lineno,
            },
            "msg": record.getMessage(),
            "logger": record.name,
            "severity": self._SEVERITIES.get(record.levelname, "CRITICAL"),
        }

    def format(self, record: logging.LogRecord) -> str:
        payload = self.head(record)
        for key, value in record.__dict__.items():
            if key not in self._STANDARD and not key.startswith("_") and key not in payload:
                payload[key] = redact(str(value)) if isinstance(value, str) else value
        if record.exc_text:
            lines = record.exc_text.strip().splitlines()
            payload["error"] = lines[-1] if lines else ""
            payload["stacktrace"] = record.exc_text
        return json.dumps(payload, default=str)


class ZapJsonFormatter(JsonFormatter):
    """The keys of ARC's controller, zap's production encoder as ARC configures it:
    `severity` (`debug`, `info`, `warn`, `error`), `ts` (RFC 3339, seconds), `logger`,
    `message`, then the fields as above."""

    def head(self, record: logging.LogRecord) -> dict[str, object]:
        level = self._LEVELS.get(record.levelname, "ERROR").lower()
        return {
            "severity": level,
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "logger": record.name,
            "message": record.getMessage(),
        }


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    logging.getLogger("uncaught").critical("uncaught exception", exc_info=(kind, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    logging.getLogger("uncaught").critical(
        "uncaught exception in thread %s",
        args.thread.name if args.thread is not None else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def configure_logging(
    *,
    fmt: LogFormat = "text",
    level: str = "INFO",
    library_level: str = "INFO",
    json_shape: JsonShape = "slog",
    stream: TextIO | None = None,
) -> None:
    """Route every logger to `stream` (stderr by default: the controller's, as ARC's; the
    listener's is stdout, as ARC's) in the chosen format, redacting secrets: this project's
    loggers at `level`, the libraries' at `library_level`, uncaught exceptions (of the main
    thread and of any other) as one CRITICAL record. An asyncio loop's default exception
    handler logs through the `asyncio` logger, so it is covered too. `json` writes the keys of
    the ARC process named by `json_shape`."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(RedactingFilter())
    if fmt == "json":
        handler.setFormatter(ZapJsonFormatter() if json_shape == "zap" else JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(library_level.upper())
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).setLevel(level.upper())
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
