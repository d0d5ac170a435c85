"""Tracing: an OpenTelemetry tracer provider that exports over OTLP/HTTP when configured.

Exporting is switched on by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), so a process needs no flag of its own. Without them spans
are still created, so code can trace unconditionally, but they go nowhere.
"""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def otlp_enabled() -> bool:
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def configure_tracing(service_name: str) -> TracerProvider:
    """A tracer provider for this process; call `shutdown()` on it at exit to flush spans.

    The provider is returned rather than installed globally, so two processes built in one test
    interpreter keep their spans apart.
    """
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if otlp_enabled():
        # Imported only when exporting: the exporter and protobuf are about 4 MB of memory.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
