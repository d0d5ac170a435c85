"""Tracing: an OpenTelemetry tracer provider that exports over OTLP/HTTP when configured.

Exporting is switched on by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), so a process needs no flag of its own. Without them the
provider is the OpenTelemetry API's no-op one: code still traces unconditionally, and its spans
go nowhere, as they did with an SDK provider that had no exporter, without importing the SDK.
Exported spans are redacted as log lines are (shared.telemetry.export).
"""

from __future__ import annotations

import os
from typing import Protocol

from opentelemetry.trace import NoOpTracerProvider, Tracer

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


class Tracing(Protocol):
    """What a process needs of its tracer provider."""

    def get_tracer(self, instrumenting_module_name: str) -> Tracer: ...

    def shutdown(self) -> None: ...


class _NotExported(NoOpTracerProvider):
    def shutdown(self) -> None:
        """Nothing was recorded, so nothing is flushed."""


def otlp_enabled() -> bool:
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def configure_tracing(service_name: str) -> Tracing:
    """A tracer provider for this process; call `shutdown()` on it at exit to flush spans.

    The provider is returned rather than installed globally, so two processes built in one test
    interpreter keep their spans apart.
    """
    if not otlp_enabled():
        return _NotExported()
    # Imported only when exporting: the SDK is about 1 MB of memory, the exporter and protobuf
    # about 4 MB more (docs/listener.md#memory).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from shared.telemetry.export import RedactingExporter

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    provider.add_span_processor(BatchSpanProcessor(RedactingExporter(OTLPSpanExporter())))
    return provider
