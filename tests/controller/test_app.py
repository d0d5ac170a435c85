"""The `gha-controller` process: bad settings stop it with one line, and a real run serves health
and metrics, leads, and on SIGTERM exits 0 having released the lease."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from controller.app import main, run
from controller.runtime import Manager
from controller.settings import ConfigError, parse_settings
from sandbox.kube.emulator import KubeEmulator
from shared.kube.objects import LEASE, Objects
from tests.controller.runtime.conftest import eventually, sample_value
from tests.controller.runtime.test_leader import free_port

ROOT = Path(__file__).resolve().parents[2]
GHA_CONTROLLER = ROOT / ".venv" / "bin" / "gha-controller"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "0"], "workers"),
        (["--workers", "many"], "workers"),
        (["--no-such-flag"], "--no-such-flag"),
        (["--lease-duration", "5", "--renew-deadline", "6"], "lease-duration"),
        (["--log-format", "xml"], "log-format"),
        (["--kubeconfig", "/does/not/exist"], "/does/not/exist"),
        (["--metrics-port", "70000"], "metrics-port"),
    ],
)
def test_a_bad_setting_exits_2_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, install=lambda _: None) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("gha-controller: ")
    assert says in err


@pytest.mark.parametrize("value", ["debug", "info", "warn", "warning", "error"])
def test_log_levels_are_arcs_and_warning(value: str) -> None:
    """ARC's controller takes debug, info, warn and error. Before: `warn` exited 2."""
    assert parse_settings(["--log-level", value], {}).log_level == value


async def test_a_setup_that_rejects_its_settings_exits_2_with_one_line(
    kube: KubeEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kube.write_kubeconfig(kubeconfig)

    def setup(manager: Manager) -> None:
        raise ConfigError("GHA_CONTROLLER_EXAMPLE: Input should be a valid integer")

    settings = parse_settings(["--kubeconfig", str(kubeconfig), "--no-leader-elect"], {})
    assert await run(settings, install=setup) == 2
    assert capsys.readouterr().err == (
        "gha-controller: GHA_CONTROLLER_EXAMPLE: Input should be a valid integer\n"
    )


@pytest.mark.parametrize(
    ("argv", "env", "workers", "namespaces"),
    [
        ([], {}, 4, []),
        (
            [],
            {"GHA_CONTROLLER_WORKERS": "8", "GHA_CONTROLLER_WATCH_NAMESPACES": "a,b"},
            8,
            ["a", "b"],
        ),
        (
            ["--workers", "2", "--watch-namespace", "c", "--watch-namespace", "d"],
            {"GHA_CONTROLLER_WORKERS": "8", "GHA_CONTROLLER_WATCH_NAMESPACES": "a"},
            2,
            ["c", "d"],
        ),
    ],
)
def test_flags_win_over_the_environment(
    argv: list[str], env: dict[str, str], workers: int, namespaces: list[str]
) -> None:
    settings = parse_settings(argv, env)
    assert (settings.workers, settings.watch_namespaces) == (workers, namespaces)
    assert settings.runtime().namespaces == (frozenset(namespaces) or None)


async def test_the_process_serves_leads_and_releases_on_sigterm(
    kube: KubeEmulator, objects: Objects, ns: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kube.write_kubeconfig(kubeconfig)
    health, metrics = free_port(), free_port()
    log_path = tmp_path / "stderr"
    log_file = log_path.open("wb")
    proc = await asyncio.create_subprocess_exec(
        str(GHA_CONTROLLER),
        "--watch-namespace",
        ns,
        "--lease-namespace",
        ns,
        "--health-port",
        str(health),
        "--metrics-port",
        str(metrics),
        "--bind-address",
        "127.0.0.1",
        "--log-format",
        "json",
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=subprocess.DEVNULL,
        stderr=log_file,
    )
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:

            async def get(port: int, path: str) -> tuple[int, str]:
                try:
                    async with http.get(f"http://127.0.0.1:{port}{path}") as resp:
                        return resp.status, await resp.text()
                except aiohttp.ClientConnectionError:
                    return 0, ""

            async def ready() -> bool:
                return (await get(health, "/readyz"))[0] == 200

            async def leading() -> bool:
                _, text = await get(metrics, "/metrics")
                lease = "gha-runner-scale-set-controller"
                return sample_value(text, "leader_election_master_status", name=lease) == 1

            await eventually(ready, within=20)
            assert (await get(health, "/healthz"))[0] == 200
            await eventually(leading, within=20)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
        lease = await objects.get(LEASE, ns, "gha-runner-scale-set-controller")
        assert lease["spec"].get("holderIdentity") is None
        # Its requests carry its User-Agent, which the API server names its writes after.
        assert {e["manager"] for e in lease["metadata"]["managedFields"]} == {"gha-controller"}
        # ARC's controller's JSON lines (zap): severity, ts, logger, message, then the fields.
        records = [json.loads(line) for line in log_path.read_text().splitlines()]
        [started] = [r for r in records if r["message"] == "controller started"]
        assert list(started)[:4] == ["severity", "ts", "logger", "message"]
        assert (started["severity"], started["logger"]) == ("info", "controller")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started["ts"])
    finally:
        log_file.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def test_the_composition_root_chooses_pydantic_cores_parser_for_the_process() -> None:
    """shared/wire.py: `compose` makes decode_json pydantic-core's, whose string cache gives two
    decodes of one key the same str (what halves the informers' cache); before it, in a fresh
    interpreter, the `json` default gives each decode its own."""
    code = """
import asyncio, json
from kubernetes_asyncio import client
from controller import app
from controller.runtime import Manager
from controller.settings import RunnerSettings
from shared.wire import decode_json

def one_key_object() -> bool:
    a, b = (decode_json(b'{"somekey": 1}', limit=100, what="x") for _ in range(2))
    return next(iter(a)) is next(iter(b))

async def main() -> None:
    before = one_key_object()
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    app.compose(Manager(api=api), RunnerSettings())
    print(json.dumps([before, one_key_object()]))
    await api.close()

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    assert json.loads(out) == [False, True]
