"""Kubernetes Events about the objects reconcilers act on (controller-runtime's recorder), so
`kubectl describe` shows why, for example, a runner failed.

Messages are built by the reconcilers from pod and service reasons and error messages; each
passes `redact`, as a log line does (docs/security.md#secrets), so a Status message that echoes a
credential does not reach the Event. A failed Event write is logged and never fails a reconcile.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from shared.kube.errors import KubeError, NamespaceTerminating
from shared.kube.objects import EVENT, Objects
from shared.kube.views import format_time
from shared.telemetry.logs import redact
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(
        self,
        *,
        objects: Objects,
        component: str,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._objects = objects
        self._component = component
        self._now = now

    async def warning(self, obj: JSONDict, *, reason: str, message: str) -> None:
        await self._record(obj, kind="Warning", reason=reason, message=message)

    async def normal(
        self,
        obj: JSONDict,
        *,
        reason: str,
        message: str,
        annotations: dict[str, str] | None = None,
    ) -> None:
        await self._record(
            obj, kind="Normal", reason=reason, message=message, annotations=annotations
        )

    async def _record(
        self,
        obj: JSONDict,
        *,
        kind: str,
        reason: str,
        message: str,
        annotations: dict[str, str] | None = None,
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        stamp = format_time(self._now())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
                **({"annotations": annotations} if annotations else {}),
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "type": kind,
            "reason": reason,
            "message": redact(message)[:1024],
            "source": {"component": self._component},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self._objects.create(EVENT, namespace, event)
        except NamespaceTerminating:
            log.debug("event not recorded: namespace %s is being deleted", namespace)
        except KubeError as exc:
            log.warning("event not recorded", extra={"reason": reason, "error": str(exc)})
