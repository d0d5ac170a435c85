"""The listener's Kubernetes calls: one EphemeralRunnerSet and the EphemeralRunners it owns.

Exactly what the listener Role allows (manifests/listener/): patch of the one set, get and
patch(/status) of runners. Every call gets a timeout (`Objects`) and a trace span.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.trace import SpanKind, Tracer

from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import Kind, Objects
from shared.typedefs import JSONDict


class RunnerSetClient:
    def __init__(
        self, objects: Objects, *, namespace: str, runner_set: str, tracer: Tracer
    ) -> None:
        self._objects = objects
        self.namespace = namespace
        self.runner_set = runner_set
        self._tracer = tracer

    @contextmanager
    def _span(self, verb: str, kind: Kind, *, name: str) -> Iterator[None]:
        with self._tracer.start_as_current_span(
            f"kube {verb} {kind.plural}",
            kind=SpanKind.CLIENT,
            attributes={
                "k8s.namespace.name": self.namespace,
                "k8s.resource": kind.plural,
                "k8s.object.name": name,
            },
        ):
            yield

    async def patch_runner_set(self, patch: JSONDict) -> JSONDict:
        with self._span("patch", EPHEMERAL_RUNNER_SET, name=self.runner_set):
            return await self._objects.patch(
                EPHEMERAL_RUNNER_SET, self.namespace, self.runner_set, patch
            )

    async def get_runner(self, name: str) -> JSONDict:
        with self._span("get", EPHEMERAL_RUNNER, name=name):
            return await self._objects.get(EPHEMERAL_RUNNER, self.namespace, name)

    async def patch_runner_status(self, name: str, patch: JSONDict) -> JSONDict:
        with self._span("patch status", EPHEMERAL_RUNNER, name=name):
            return await self._objects.patch(
                EPHEMERAL_RUNNER, self.namespace, name, patch, status=True
            )
