"""One redaction path (docs/security.md#secrets): a legacy PAT (40 hex digits, a shape no
pattern can tell from a commit SHA) read from a runner's GitHub config Secret is registered with
`shared.telemetry.logs.mask` as it is read, so when the API server's Status messages echo it
(a failed pass, then a refused pod), it reaches no log line, Event, span attribute, status or
metric. The controller runs as in the other rig tests, exporting its spans over OTLP/HTTP to a
collector on loopback; its log lines go through the handler filter gha-controller installs."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest

from controller.runtime.events import EventRecorder
from sandbox.actions.emulator import ActionsEmulator
from shared.kube.objects import EVENT, SECRET
from shared.telemetry.logs import PROJECT_LOGGERS, REDACTED, RedactingFilter, mask
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions, open_rig
from tests.listener.conftest import Collector, otlp_collector  # noqa: F401 (a fixture)

PAT = "3f9c0e1a7b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e"
ECHO = f'spec.containers[0].env[1].value: Invalid value: "{PAT}"'


class Lines(logging.Handler):
    """Every log line as the process's handler would write it (its redacting filter)."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(RedactingFilter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter().format(record))


@pytest.fixture
def log_lines() -> Iterator[Lines]:
    handler = Lines()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in PROJECT_LOGGERS}
    root.addHandler(handler)
    for name in PROJECT_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


async def test_a_legacy_pat_echoed_by_the_api_server_is_redacted_everywhere(
    monkeypatch: pytest.MonkeyPatch,
    otlp_collector: Collector,  # noqa: F811 (the fixture imported above)
    log_lines: Lines,
    namespace: str,
    actions: ActionsEmulator,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_collector.url)
    actions.credentials.pats.add(PAT)
    options = RigOptions(controllers=("ephemeralrunner",), kubelet=False)
    async with open_rig(options, namespace=namespace, actions=actions) as rig:
        await rig.objects.patch(
            SECRET,
            namespace,
            "github-secret",
            {"data": {"github_token": base64.b64encode(PAT.encode()).decode()}},
        )
        # Two failed passes (a server error echoing the value), then a refusal that fails
        # the runner: its status, its Event and a log line quote the Status message.
        rig.kube.faults.inject(verb="create", resource="pods", status=500, count=2, message=ECHO)
        rig.kube.faults.inject(verb="create", resource="pods", status=422, message=ECHO)
        name = (await rig.create_runner())["metadata"]["name"]

        async def failed() -> bool:
            runner = await rig.runner(name)
            return ((runner or {}).get("status") or {}).get("phase") == "Failed"

        await rig.until(failed, what="the runner failed")
        await rig.settle()
        codes = [
            r.code
            for r in rig.kube.requests.log
            if r.user == CONTROLLER_USER and r.verb == "create" and r.resource == "pods"
        ]
        assert codes == [500, 500, 422]
        runner = await rig.runner(name)
        events = (await rig.objects.list(EVENT, namespace))["items"]
        metrics = rig.metrics()
    # The manager stopped: the tracer flushed its spans to the collector.

    assert runner is not None
    assert runner["status"]["message"].endswith(f'Invalid value: "{REDACTED}"')
    messages = [str(e.get("message")) for e in events]
    assert any(REDACTED in m for m in messages)
    assert not [m for m in messages if PAT in m]

    errors = [
        a.value.string_value
        for span in otlp_collector.spans()
        for a in span.attributes
        if a.key == "error"
    ]
    assert len([e for e in errors if f'Invalid value: "{REDACTED}"' in e]) == 2
    every_span_string = [
        str(span.name) + str(span.attributes) + str(span.events) + str(span.status)
        for span in otlp_collector.spans()
    ]
    assert not [s for s in every_span_string if PAT in s]

    assert any(REDACTED in line and "Invalid value" in line for line in log_lines.lines)
    assert not [line for line in log_lines.lines if PAT in line]
    assert PAT not in metrics


async def test_an_event_message_is_redacted_whoever_built_it(rig: Rig) -> None:
    secret = "9d8c7b6a5f4e3d2c1b0a9d8c7b6a5f4e3d2c1b0a"
    mask(secret)
    runner = await rig.create_runner()
    recorder = EventRecorder(objects=rig.manager.objects, component="gha-controller")
    await recorder.warning(
        runner, reason="Test", message=f"quoted {secret} and {'ghp_' + 'x' * 36}"
    )
    [event] = [
        e for e in (await rig.objects.list(EVENT, rig.namespace))["items"] if e["reason"] == "Test"
    ]
    assert event["message"] == f"quoted {REDACTED} and {REDACTED}"
