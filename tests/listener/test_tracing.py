"""Spans reach an OTLP/HTTP collector when OTEL_EXPORTER_OTLP_ENDPOINT is set."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.trace import Status, StatusCode

from shared.telemetry.logs import REDACTED, mask
from shared.telemetry.tracing import configure_tracing, otlp_enabled
from tests.listener.conftest import Cluster, Collector, GitHub, StartListener
from tests.listener.test_e2e_job_started import recorded, start_job_on


async def test_spans_are_exported_over_otlp(
    monkeypatch: pytest.MonkeyPatch, otlp_collector: Collector
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    provider = configure_tracing("gha-listener-test")
    with provider.get_tracer("test").start_as_current_span("message batch"):
        pass
    # The exporter is synchronous; flushing from a thread keeps this loop serving it.
    await asyncio.to_thread(provider.shutdown)
    [request] = otlp_collector.requests
    resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "gha-listener-test"
    assert [span.name for span in otlp_collector.spans()] == ["message batch"]


async def test_listener_traces_batches_and_kubernetes_calls(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    otlp_collector: Collector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    await cluster.create_runner("runner-a", phase="Pending")
    running = await start_listener()
    await start_job_on(github, "runner-a")
    await recorded(cluster, "runner-a")
    assert await running.stop() == 0
    spans = otlp_collector.spans()
    batches = {span.span_id for span in spans if span.name == "message batch"}
    by_name = {span.name: span for span in spans}
    assert {"kube patch ephemeralrunnersets", "kube get ephemeralrunners"} <= set(by_name)
    assert by_name["kube patch status ephemeralrunners"].parent_span_id in batches


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


async def test_exported_spans_are_redacted_as_log_lines_are(
    monkeypatch: pytest.MonkeyPatch, otlp_collector: Collector
) -> None:
    """Whoever sets a span's strings (an attribute, a recorded exception, a status), what leaves
    the process passes `redact`: a registered credential of no known shape and a token-shaped
    one are replaced (docs/security.md#secrets)."""
    legacy_pat = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
    shaped = "ghs_" + "a1" * 18
    mask(legacy_pat)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    provider = configure_tracing("gha-listener-test")
    with provider.get_tracer("test").start_as_current_span(f"pass {legacy_pat}") as span:
        span.set_attribute("error", f"422 Invalid: value {legacy_pat}")
        span.set_attribute("tokens", [shaped, "kept"])
        span.record_exception(RuntimeError(f"failed with {shaped}"))
        span.set_status(Status(StatusCode.ERROR, f"echoed {legacy_pat}"))
    await asyncio.to_thread(provider.shutdown)
    [exported] = otlp_collector.spans()
    text = str(exported)
    assert legacy_pat not in text
    assert shaped not in text
    attributes = {a.key: a.value for a in exported.attributes}
    assert attributes["error"].string_value == f"422 Invalid: value {REDACTED}"
    assert [v.string_value for v in attributes["tokens"].array_value.values] == [REDACTED, "kept"]
    assert exported.name == f"pass {REDACTED}"
    assert exported.status.message == f"echoed {REDACTED}"
    assert f"failed with {REDACTED}" in text
