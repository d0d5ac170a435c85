"""The listener process does not import what it does not use (docs/listener.md#memory):
kubernetes-asyncio, whose package brings every API model (about 40 MB); PyJWT and cryptography,
which only a GitHub App needs (about 9 MB); the OTLP exporter (about 4 MB) and OpenTelemetry's
tracing SDK (about 1 MB), which only exporting traces needs; OpenTelemetry's metrics SDK and its
Prometheus exporter (about 1 MB), which the gha_* series no longer go through; croniter and
dateutil (about 0.8 MB), which only a schedule needs; pydantic-settings with the argparse and
PyYAML it imports (about 1.2 MB), aiohttp's web application, router and runners (about 1 MB),
which three fixed probe paths do not need; PyYAML, which only a kubeconfig needs, and argparse,
which only `--help` and `--version` need; pydantic and pydantic-core (about 12 MB with the models
built on them), which only a scaling policy needs; importlib.metadata (0.8 MB); and, as
`gha-listener` starts, the C extensions of frozenlist and aiohttp (1.7 MB). Counted in a fresh
interpreter, so a regression shows without measuring memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = (
    "kubernetes_asyncio",
    "jwt",
    "cryptography",
    "opentelemetry.exporter",
    "opentelemetry.sdk",
    "croniter",
    "dateutil",
    "pydantic_settings",
    "yaml",
    "pydantic",
    "pydantic_core",
    "shared.policymodel",
    "shared.api.base",
    "shared.api.embedded",
    "shared.api.resources",
)
EXACT = (
    "argparse",
    "aiohttp.web",
    "aiohttp.web_app",
    "aiohttp.web_runner",
    "importlib.metadata",
)
# The C extensions `gha-listener` leaves for their pure-Python code (listener/__main__.py).
EXTENSIONS = ("frozenlist._frozenlist", "aiohttp._http_parser")


def last_line(code: str) -> str:
    """The last line `code` prints, run in a fresh interpreter without OTEL_* variables."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    ).stdout
    return out.splitlines()[-1]


def modules_after(code: str) -> list[str]:
    loaded: list[str] = json.loads(
        last_line(f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    )
    return loaded


def test_importing_the_listener_loads_none_of_the_heavy_modules() -> None:
    loaded = modules_after("import listener.__main__, listener.app")
    assert "listener.service" in loaded
    assert [name for name in loaded if name.startswith(HEAVY) or name in EXACT] == []


def test_a_config_loaded_and_messages_decoded_bring_no_pydantic() -> None:
    """What the listener does before and while it serves: load its settings, decode answers and
    job messages. Before: the settings, the Actions messages and the custom resources' models
    were pydantic models, and shared.wire parsed with pydantic-core."""
    loaded = modules_after(
        "from listener.config import ListenerSettings\n"
        "from shared.actions.models import RunnerScaleSetMessage\n"
        "from shared.wire import decode_json\n"
        "ListenerSettings(configure_url='https://github.com/o', github_token='t', "
        "ephemeral_runner_set_namespace='ns', ephemeral_runner_set_name='set', "
        "runner_scale_set_id=1, min_runners='1', metrics={'gauges': {}})\n"
        'body = decode_json(b\'[{"messageType": "JobStarted", "runnerId": 1}]\', '
        "limit=99, what='x')\n"
        "message = RunnerScaleSetMessage.from_wire({'messageId': 1, 'messageType': "
        "'RunnerScaleSetJobMessages', 'body': __import__('json').dumps(body)})\n"
        "assert message.jobs[0].runner_id == 1\n"
    )
    assert [name for name in loaded if name.startswith(("pydantic", "pydantic_core"))] == []


def test_a_scaling_policy_alone_brings_pydantic_to_validate_it() -> None:
    loaded = modules_after(
        "from listener.config import ListenerSettings\n"
        "settings = ListenerSettings(configure_url='https://github.com/o', github_token='t', "
        "ephemeral_runner_set_namespace='ns', ephemeral_runner_set_name='set', "
        "runner_scale_set_id=1, scaling_policy={'minIdle': 1})\n"
        "assert settings.scaling_policy.min_idle == 1\n"
    )
    assert "pydantic" in loaded


def test_gha_listener_leaves_the_c_extensions_of_frozenlist_and_aiohttp() -> None:
    """Before: frozenlist's C++ extension (and libstdc++ with it) and aiohttp's HTTP parsers
    were loaded: 1.7 MB."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.endswith("_NO_EXTENSIONS") and not name.startswith("OTEL_")
    }
    # main() sets the switches first; --version then exits before the listener's import.
    code = (
        "import json, sys\n"
        "from listener.__main__ import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import listener.app\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    ).stdout
    loaded = json.loads(out.splitlines()[-1])
    assert "aiohttp.http_parser" in loaded
    assert [name for name in loaded if name in EXTENSIONS] == []


def test_every_name_of_shared_api_is_still_there() -> None:
    """shared.api imports its models when first named: each name it lists still resolves."""
    import shared.api

    for name in shared.api.__all__:
        assert getattr(shared.api, name) is not None, name


def test_tracing_and_metrics_without_an_otlp_endpoint_load_no_opentelemetry_sdk() -> None:
    """Before: the tracer provider was the SDK's whatever the configuration, and the gha_*
    series went through the SDK's meter and its Prometheus exporter."""
    loaded = modules_after(
        "from listener.metrics import ListenerMetrics\n"
        "from shared.telemetry.tracing import configure_tracing\n"
        "tracing = configure_tracing('gha-listener')\n"
        "with tracing.get_tracer('gha-listener').start_as_current_span('message batch'):\n"
        "    pass\n"
        "tracing.shutdown()\n"
        "metrics = ListenerMetrics(None, scale_set_labels={'name': 'set'})\n"
        "metrics.record_desired(1)\n"
        "assert b'gha_desired_runners{' in metrics.render()\n"
    )
    assert [name for name in loaded if name.startswith("opentelemetry.sdk")] == []


def test_the_actions_client_without_a_root_ca_builds_no_trust_store_of_its_own() -> None:
    """Each trust store built costs about 0.8 MB; aiohttp has built one on the system's roots
    when imported. Before: every Actions client built another."""
    built = last_line(
        "import ssl\n"
        "from shared.actions.client import ActionsClient\n"
        "from shared.actions.credentials import PersonalAccessToken\n"
        "built = []\n"
        "default_context = ssl.create_default_context\n"
        "def counted(*args, **kwargs):\n"
        "    built.append(args or kwargs)\n"
        "    return default_context(*args, **kwargs)\n"
        "ssl.create_default_context = counted\n"
        "ActionsClient(config_url='https://github.com/octo-org', "
        "credentials=PersonalAccessToken('ghp_' + 36 * 'x'))\n"
        "print(len(built))\n"
    )
    assert built == "0"
