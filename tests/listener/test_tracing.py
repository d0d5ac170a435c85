"""Spans reach an OTLP/HTTP collector when OTEL_EXPORTER_OTLP_ENDPOINT is set."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from shared.telemetry.tracing import configure_tracing, otlp_enabled


async def test_spans_are_exported_over_otlp(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[ExportTraceServiceRequest] = []

    async def traces(request: web.Request) -> web.Response:
        received.append(ExportTraceServiceRequest.FromString(await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    try:
        provider = configure_tracing("gha-listener-test")
        with provider.get_tracer("test").start_as_current_span("message batch"):
            pass
        # The exporter is synchronous; flushing from a thread keeps this loop serving it.
        await asyncio.to_thread(provider.shutdown)
    finally:
        await runner.cleanup()
    spans = [
        (span.name, {a.key: a.value.string_value for a in resource.resource.attributes})
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    [(name, resource)] = spans
    assert (name, resource["service.name"]) == ("message batch", "gha-listener-test")


@pytest.mark.parametrize(
    ("variables", "enabled"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ],
)
def test_export_follows_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], enabled: bool
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert otlp_enabled() is enabled
