"""Watch streams: initial events or the backlog after a resourceVersion, then live events,
bookmarks, 410 Expired, and the fault hooks that cut or compact open watches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp import web

from sandbox.kube.faults import Faults, Request, Requests
from sandbox.kube.registry import Registry
from sandbox.kube.resources import ResourceType
from sandbox.kube.selectors import FieldSelector, LabelSelector
from sandbox.kube.server.tables import event_line, wants_table
from sandbox.kube.server.wire import ACCOUNTED, USER, Obj, dumps, go_bool
from sandbox.kube.status import ApiError, bad_request, too_old
from sandbox.kube.store import Event, Store, Subscription

# Serialized event lines kept for reuse by every watcher of the same event and version.
LINE_CACHE = 4096


class Watches:
    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        requests: Requests,
        bookmark_interval: float,
        watch_timeout: float,
        faults: Faults,
    ) -> None:
        self.store = store
        self.registry = registry
        self.requests = requests
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.faults = faults
        self._lines: dict[tuple[int, str, str], bytes] = {}
        # The store subscriptions of open watch requests: what the fault hooks cut, leaving the
        # in-process subscribers (the kubelet, the demo's observer) alone.
        self.open: set[Subscription] = set()

    # --- fault hooks -------------------------------------------------------------------------

    def drop_all(self) -> None:
        """Cut every open watch connection mid-stream."""
        for sub in list(self.open):
            sub.queue.put_nowait(ConnectionAbortedError("dropped by fault injection"))

    def force_gone(self) -> None:
        """Compact the history: open watches get ERROR 410, older versions are 410."""
        self.store.compact()
        for sub in list(self.open):
            sub.queue.put_nowait(too_old(0, self.store.rv))

    def restart(self) -> None:
        """The API server shuts down: every open watch ends (its stream closes cleanly) and the
        history is gone."""
        self.store.compact()
        for sub in list(self.open):
            sub.queue.put_nowait(None)

    # --- the stream --------------------------------------------------------------------------

    async def serve(
        self,
        request: web.Request,
        rt: ResourceType,
        *,
        ns: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> web.StreamResponse:
        q = request.query
        bookmarks = go_bool(q.get("allowWatchBookmarks"))
        rv_param = q.get("resourceVersion", "")
        send_initial = go_bool(q.get("sendInitialEvents"))
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else self.watch_timeout
            start = int(rv_param) if rv_param else 0
        except ValueError as exc:
            raise bad_request(f"invalid watch parameters: {exc}") from exc
        sub = self.store.subscribe({rt.key})
        self.open.add(sub)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            await resp.prepare(request)
            # A watch counts once it is established, not when it ends (which may be never).
            self.requests.record(
                Request(
                    verb="watch",
                    resource=rt.plural,
                    subresource="",
                    user=request[USER].name,
                    namespace=ns or "",
                    code=200,
                    path=request.path_qs,
                )
            )
            request[ACCOUNTED] = True

            def matches(obj: Obj | None) -> bool:
                if obj is None:
                    return False
                if ns is not None and obj["metadata"].get("namespace") != ns:
                    return False
                return labels.matches(obj) and fields.matches(obj)

            sent_rv = self.store.rv
            if start == 0 or send_initial:
                for obj in list(self.store.items(rt.key, ns)):
                    if matches(obj):
                        await resp.write(
                            event_line(
                                request,
                                rt,
                                etype="ADDED",
                                obj=self.registry.render(rt, obj),
                                clock=self.registry.clock,
                            )
                        )
                if send_initial and bookmarks:
                    await resp.write(_bookmark(rt, sent_rv, initial_events_end=True))
            else:
                backlog = self.store.events_since(rt.key, start)
                if backlog is None:
                    err = too_old(start, self.store.compacted(rt.key) + 1)
                    await resp.write(dumps({"type": "ERROR", "object": err.status()}))
                    return resp
                sent_rv = start
                for ev in backlog:
                    line = self._translate(request, rt, ev=ev, matches=matches)
                    if line:
                        await resp.write(line)
                    sent_rv = ev.rv
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(next_bookmark - now, 0))
                try:
                    # Queued events go out before any bookmark: wait_for(get(), 0) times out
                    # even when the queue holds an item, which would starve them.
                    if sub.queue.empty():
                        item = await asyncio.wait_for(sub.queue.get(), wait)
                    else:
                        item = sub.queue.get_nowait()
                except TimeoutError:
                    if bookmarks and time.monotonic() >= next_bookmark and sub.queue.empty():
                        if not self.faults.bookmarks_withheld():
                            await resp.write(_bookmark(rt, self.store.rv))
                        next_bookmark = time.monotonic() + self.bookmark_interval
                    continue
                if isinstance(item, ApiError):
                    await resp.write(dumps({"type": "ERROR", "object": item.status()}))
                    break
                if isinstance(item, BaseException):
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                if item is None:
                    break
                if item.rv <= sent_rv:
                    continue
                line = self._translate(request, rt, ev=item, matches=matches)
                if line:
                    await resp.write(line)
            await resp.write_eof()
        except ApiError as err:
            if resp.prepared:
                await resp.write(dumps({"type": "ERROR", "object": err.status()}))
            else:
                raise
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.open.discard(sub)
            self.store.unsubscribe(sub)
        return resp

    def _translate(
        self,
        request: web.Request,
        rt: ResourceType,
        *,
        ev: Event,
        matches: Callable[[Obj | None], bool],
    ) -> bytes | None:
        """The line a watcher gets for a stored event, given its selectors (the cacher's
        convertToWatchEvent: ADDED/DELETED when an update enters or leaves the selection)."""
        now_match = matches(ev.obj)
        if ev.type in ("ADDED", "DELETED"):
            return self._shared_line(request, rt, ev=ev, etype=ev.type) if now_match else None
        was = matches(ev.old)
        if now_match:
            return self._shared_line(request, rt, ev=ev, etype="MODIFIED" if was else "ADDED")
        if was and ev.old is not None:
            last = self.registry.render(rt, ev.old)
            last["metadata"] = {**ev.old["metadata"], "resourceVersion": str(ev.rv)}
            return event_line(request, rt, etype="DELETED", obj=last, clock=self.registry.clock)
        return None

    def _shared_line(
        self, request: web.Request, rt: ResourceType, *, ev: Event, etype: str
    ) -> bytes:
        """Serialize an event once for all the watchers that get it in the same form."""
        if wants_table(request):
            return event_line(
                request,
                rt,
                etype=etype,
                obj=self.registry.render(rt, ev.obj),
                clock=self.registry.clock,
            )
        key = (ev.rv, etype, rt.version)
        line = self._lines.get(key)
        if line is None:
            if len(self._lines) >= LINE_CACHE:
                self._lines.clear()
            line = self._lines[key] = dumps(
                {"type": etype, "object": self.registry.render(rt, ev.obj)}
            )
        return line


def _bookmark(rt: ResourceType, rv: int, *, initial_events_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return dumps(
        {
            "type": "BOOKMARK",
            "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
        }
    )
