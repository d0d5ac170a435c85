"""A span per reconcile pass (docs/controller-runtime.md#traces): its attributes and result,
and a reconciler choosing the tracer, parent and attributes through `PassTracing`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from kubernetes_asyncio import client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, StatusCode, TraceFlags

from controller.runtime import Backoff, Controller, Manager, Request, Result, RuntimeSettings
from controller.runtime.controller import PassSpan
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import Objects
from tests.controller.runtime.conftest import namespace_body, runner_body

PARENT = SpanContext(
    trace_id=0x1234, span_id=0x56, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
)


class Traced:
    """Fails the first pass on each key, asks for a requeue on the second; puts the passes of
    runners labelled `joined` under `PARENT`."""

    def __init__(self, manager: Manager, exporter: InMemorySpanExporter) -> None:
        self.cache = manager.cache(EPHEMERAL_RUNNER)
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = provider.get_tracer("test")
        self.passes: dict[str, int] = {}
        self.passed = asyncio.Event()

    def pass_span(self, request: Request) -> PassSpan:
        runner = self.cache.get(request.namespace, request.name) or {"metadata": {}}
        if (runner["metadata"].get("labels") or {}).get("joined"):
            parent = trace.set_span_in_context(trace.NonRecordingSpan(PARENT))
            return PassSpan(self.tracer, parent=parent, attributes={"job": "7"})
        return PassSpan(self.tracer)

    async def reconcile(self, request: Request) -> Result:
        self.passes[request.name] = self.passes.get(request.name, 0) + 1
        if self.passes[request.name] == 1:
            raise RuntimeError("first pass fails")
        if self.passes[request.name] == 2:
            return Result(requeue_after=0.01)
        self.passed.set()
        return Result()


@contextlib.asynccontextmanager
async def running(namespace: str, add: Callable[[Manager], object]) -> AsyncIterator[Objects]:
    """A manager over an emulator with the controllers `add` puts on it, synced."""
    async with KubeEmulator(kubelet=False) as kube:
        kube.apply_crds(project_crds())
        kube.apply(namespace_body(namespace))
        async with client.ApiClient(await kube.configuration()) as api:
            manager = Manager(
                api=api,
                settings=RuntimeSettings(
                    namespaces=frozenset({namespace}),
                    backoff=Backoff(base=0.01, maximum=0.1),
                    leader_election=None,
                ),
            )
            add(manager)
            task = asyncio.create_task(manager.run())
            try:
                await asyncio.wait_for(manager.wait_synced(), 10)
                yield Objects(api, timeout=5.0)
            finally:
                manager.stop()
                await asyncio.wait_for(task, 10)


@pytest.fixture
async def traced(namespace: str) -> AsyncIterator[tuple[Objects, InMemorySpanExporter, Traced]]:
    exporter = InMemorySpanExporter()
    made: list[Traced] = []

    def add(manager: Manager) -> None:
        made.append(Traced(manager, exporter))
        manager.add(Controller(name="runner", for_=EPHEMERAL_RUNNER, reconciler=made[0]))

    async with running(namespace, add) as objects:
        yield objects, exporter, made[0]


async def test_every_pass_is_a_span_with_its_result(
    traced: tuple[Objects, InMemorySpanExporter, Traced], namespace: str
) -> None:
    objects, exporter, reconciler = traced
    await objects.create(EPHEMERAL_RUNNER, namespace, runner_body("one"))
    await asyncio.wait_for(reconciler.passed.wait(), 10)
    failed, requeued, succeeded = exporter.get_finished_spans()[:3]
    for span in (failed, requeued, succeeded):
        assert span.name == "reconcile runner"
        assert span.attributes is not None
        assert span.attributes["controller"] == "runner"
        assert span.attributes["namespace"] == namespace
        assert span.attributes["name"] == "one"
        assert span.parent is None
    assert failed.attributes is not None
    assert failed.attributes["result"] == "error"
    assert failed.attributes["error"] == "RuntimeError: first pass fails"
    assert "requeue_after" in failed.attributes
    assert failed.status.status_code is StatusCode.ERROR
    assert requeued.attributes is not None
    assert requeued.attributes["result"] == "requeue_after"
    assert requeued.attributes["requeue_after"] == 0.01
    assert succeeded.attributes is not None
    assert succeeded.attributes["result"] == "success"
    assert succeeded.status.status_code is StatusCode.UNSET
    # Three traces: each pass is a trace of its own when the reconciler names no parent.
    assert len({span.context.trace_id for span in (failed, requeued, succeeded)}) == 3


async def test_the_reconciler_puts_its_passes_in_a_trace_of_its_choosing(
    traced: tuple[Objects, InMemorySpanExporter, Traced], namespace: str
) -> None:
    objects, exporter, reconciler = traced
    await objects.create(EPHEMERAL_RUNNER, namespace, runner_body("two", labels={"joined": "yes"}))
    await asyncio.wait_for(reconciler.passed.wait(), 10)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    for span in spans:
        assert span.context.trace_id == PARENT.trace_id
        assert span.parent is not None
        assert span.parent.span_id == PARENT.span_id
        assert span.attributes is not None
        assert span.attributes["job"] == "7"
        assert span.attributes["name"] == "two"


class Plain:
    """A reconciler that chooses nothing about its spans."""

    def __init__(self) -> None:
        self.passed = asyncio.Event()

    async def reconcile(self, request: Request) -> Result:
        self.passed.set()
        return Result()


async def test_a_reconciler_that_chooses_nothing_gets_the_managers_tracer(namespace: str) -> None:
    """`gha-controller` sets the manager's tracer to the process's exporting one: every
    controller's passes are exported, not only those of a reconciler with `PassTracing`."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plain = Plain()

    def add(manager: Manager) -> None:
        manager.tracer = provider.get_tracer("test")
        manager.add(Controller(name="plain", for_=EPHEMERAL_RUNNER, reconciler=plain))

    async with running(namespace, add) as objects:
        await objects.create(EPHEMERAL_RUNNER, namespace, runner_body("three"))
        await asyncio.wait_for(plain.passed.wait(), 10)
    (span,) = exporter.get_finished_spans()
    assert span.name == "reconcile plain"
    assert span.attributes is not None
    assert span.attributes["name"] == "three"
