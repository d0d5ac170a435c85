"""The emulator as a process (`python -m sandbox.actions`) and in TLS mode."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from pathlib import Path

import aiohttp
import pytest

from sandbox.actions import ActionsEmulator
from sandbox.actions.__main__ import main
from tests.sandbox.actions.wire import authenticate


async def test_tls_serves_with_the_generated_ca(http: aiohttp.ClientSession) -> None:
    async with ActionsEmulator(tls=True) as emulator:
        assert emulator.url.startswith("https://127.0.0.1:")
        assert emulator.ca_pem is not None
        trusted = ssl.create_default_context(cadata=emulator.ca_pem.decode())
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusted)) as secure:
            service = await authenticate(emulator, secure)
            assert service.url.startswith(emulator.url)
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await http.get(emulator.url + "/_admin/state")


async def test_plain_mode_has_no_ca(actions: ActionsEmulator) -> None:
    assert actions.url.startswith("http://")
    assert actions.ca_pem is None


async def test_process_prints_url_and_credentials_and_stops_on_sigterm(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    ca_file = tmp_path / "ca.pem"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.actions",
        "--port",
        "0",
        "--tls",
        "--ca-file",
        str(ca_file),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(30):
            url = (await process.stdout.readline()).decode().strip()
            credentials = json.loads(await process.stdout.readline())
        trusted = ssl.create_default_context(cafile=str(ca_file))
        async with http.get(url + "/_admin/state", ssl=trusted) as reply:
            assert reply.status == 200
        assert credentials["configure_url"] == url + "/example-org"
        assert credentials["github_token"].startswith("ghp_")
        assert credentials["github_app_private_key"].startswith("-----BEGIN")
        assert credentials["github_app_installation_id"] > 0
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            code = await process.wait()
    assert code == 0


def test_ca_file_without_tls_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ca-file", "x.pem"]) == 2
    assert "--ca-file needs --tls" in capsys.readouterr().err


async def test_a_taken_port_is_one_line_and_status_2(actions: ActionsEmulator) -> None:
    port = actions.url.rsplit(":", 1)[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.actions",
        "--port",
        port,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        stdout, stderr = await process.communicate()

    assert process.returncode == 2
    assert stdout == b""
    assert stderr.decode().startswith(f"cannot listen on 127.0.0.1:{port}:")
    assert stderr.decode().count("\n") == 1
