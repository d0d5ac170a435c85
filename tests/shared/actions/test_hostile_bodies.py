"""Hostile answers of the Actions service, over the wire: nested past any parser's stack, over
the size cap (announced or streamed without a length), not JSON. Each is an UnexpectedResponse
naming why, never a RecursionError, and nothing over the cap is read (docs/security.md, "Bad
input")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from sandbox.actions import ActionsEmulator
from shared.actions import ActionsClient, MessageSession, RunnerScaleSet, UnexpectedResponse
from shared.actions.transport import MAX_RESPONSE_BYTES
from tests.shared.actions.test_every_endpoint import CALLS

DEEP = 100_000
# Endpoints whose answer the client decodes (the others only read the status).
DECODED = [
    "get_scale_set",
    "get_runner_group",
    "get_message",
    "acquire_jobs",
    "acquirable_jobs",
    "generate_jit_config",
    "get_runner",
]
BODIES = {
    "nested": "[" * DEEP + "]" * DEEP,
    "nested objects": '{"a":' * DEEP + "1" + "}" * DEEP,
    "NaN": '{"id": NaN, "count": NaN, "value": [], "messageId": NaN}',
    "huge number": '{"id": 1' + "0" * 5_000 + ', "messageId": 1' + "0" * 5_000 + "}",
    # Valid JSON, only too long.
    "over the cap": json.dumps({"id": 1, "count": 0, "value": [], "pad": "x" * MAX_RESPONSE_BYTES}),
}
WHY = {
    "nested": "recursion limit exceeded",
    "nested objects": "recursion limit exceeded",
    "NaN": "",
    "huge number": "",
    "over the cap": "over the cap of 4.0 MiB",
}


@pytest.mark.parametrize("shape", sorted(BODIES))
@pytest.mark.parametrize("endpoint", DECODED)
async def test_a_hostile_answer_is_an_unexpected_response(
    actions: ActionsEmulator,
    client: ActionsClient,
    scale_set: RunnerScaleSet,
    session: MessageSession,
    endpoint: str,
    shape: str,
) -> None:
    _, call = CALLS[endpoint]
    actions.faults.inject(endpoint, status=200, body=BODIES[shape], count=1)
    with pytest.raises(UnexpectedResponse) as caught:
        await call(client, session, scale_set.id)
    assert WHY[shape] in str(caught.value)
    assert len(str(caught.value)) < 400


@pytest_asyncio.fixture
async def endless() -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server streaming a body without Content-Length, eight times the cap; the
    list holds the bytes it managed to send."""
    sent = [0]

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        chunk = b"[" * 2**16
        # Bounded, so a client without a cap reads it all and fails rather than hang.
        while sent[0] < 8 * MAX_RESPONSE_BYTES:
            await response.write(chunk)
            sent[0] += len(chunk)
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/", sent
    await runner.cleanup()


async def test_a_body_streamed_past_the_cap_is_cut_there(
    client: ActionsClient, endless: tuple[str, list[int]]
) -> None:
    url, sent = endless
    with pytest.raises(UnexpectedResponse, match=r"over the cap of 4\.0 MiB"):
        await client.transport.request("GET", url, headers={})
    # The client stopped reading at the cap: the server could not send much more (the socket
    # buffers of both ends), never the gigabytes it would have.
    assert MAX_RESPONSE_BYTES < sent[0] < 4 * MAX_RESPONSE_BYTES
