"""A tiny real HTTP proxy on loopback: forwards absolute-form requests and tunnels CONNECT."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

_HOP_BY_HOP = ("connection:", "proxy-connection:", "keep-alive:", "proxy-authorization:")


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        sink.close()


class ForwardingProxy:
    """Records every request line it receives, `(method, target)`, and any Proxy-Authorization.

    Plain HTTP requests are rewritten to origin form with `Connection: close` (one request per
    upstream connection keeps the forwarding trivially correct); CONNECT opens a byte tunnel.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.authorizations: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        try:
            await self._serve(reader, writer)
        finally:
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, version = request_line.split(" ", 2)
        self.requests.append((method, target))
        self.authorizations.extend(
            h.partition(":")[2].strip()
            for h in header_lines
            if h.lower().startswith("proxy-authorization:")
        )
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            url = urlsplit(target)
            up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port or 80)
            path = url.path + (f"?{url.query}" if url.query else "")
            headers = [h for h in header_lines if h and not h.lower().startswith(_HOP_BY_HOP)] + [
                "Connection: close"
            ]
            lines = [f"{method} {path} {version}", *headers, "", ""]
            up_writer.write("\r\n".join(lines).encode("latin-1"))
        self._writers.append(up_writer)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
