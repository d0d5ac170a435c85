"""Spans leave the process through `RedactingExporter`: every string in them passes `redact`,
the function every log line passes (shared.telemetry.logs), so a span says no more than a log
line would, whoever set its attributes (a failed pass's `error`, an exception event's message
and stack trace, a Status description). Imported only when spans are exported
(shared.telemetry.tracing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from shared.telemetry.logs import redact


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return tuple(_value(item) for item in value)
    return value


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {key: _value(value) for key, value in (attributes or {}).items()}


def redacted(span: ReadableSpan) -> ReadableSpan:
    """A copy of `span` with its name, attributes, events and status description redacted."""
    status = span.status
    if status.description:
        status = Status(status.status_code, redact(status.description))
    return ReadableSpan(
        name=redact(span.name),
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=_attributes(span.attributes),
        events=[
            Event(event.name, _attributes(event.attributes), event.timestamp)
            for event in span.events
        ],
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingExporter(SpanExporter):
    """Exports through `inner` the redacted copies of the spans."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([redacted(span) for span in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)
