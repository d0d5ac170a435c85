"""The controller's /metrics serves every series ARC's Grafana dashboard queries of it, with the
labels the dashboard selects on and no others (docs/metrics.md#arcs-grafana-dashboard)."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.runtime.health import metrics_routes, serve
from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import CONTROLLER_USER, Rig, metric

# (sample name, labels the dashboard's query selects or groups by), from docs/metrics.md.
DASHBOARD = [
    ("controller_runtime_reconcile_time_seconds_sum", set()),
    ("workqueue_queue_duration_seconds_sum", set()),
    ("controller_runtime_reconcile_errors_total", set()),
    ("workqueue_depth", {"name"}),
    ("controller_runtime_active_workers", {"controller"}),
    ("rest_client_requests_total", {"method", "code"}),
    ("gha_controller_pending_ephemeral_runners", {"name", "namespace"}),
    ("gha_controller_running_ephemeral_runners", {"name", "namespace"}),
    ("gha_controller_failed_ephemeral_runners", {"name", "namespace"}),
]
ARC_GAUGE_LABELS = {"name", "namespace", "repository", "organization", "enterprise"}


async def scrape(rig: Rig) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples, as served over HTTP on /metrics."""
    runner = await serve(metrics_routes(rig.manager), host="127.0.0.1", port=0)
    try:
        host, port = runner.addresses[0][:2]
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://{host}:{port}/metrics") as response,
        ):
            text = await response.text()
    finally:
        await runner.cleanup()
    samples: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample.labels)
    return samples


async def test_every_series_arcs_dashboard_queries_is_served(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    await rig.registered(1)
    await rig.settle()
    samples = await scrape(rig)
    missing = [name for name, _ in DASHBOARD if name not in samples]
    assert missing == []
    for name, labels in DASHBOARD:
        assert all(labels <= set(have) for have in samples[name]), name


async def test_arcs_gauges_carry_exactly_arcs_labels(rig: Rig) -> None:
    """No otel_scope_* labels: a dashboard's `sum by` and label_values() see ARC's set."""
    await rig.create_runner_set(replicas=1, patch_id=1)
    await rig.registered(1)
    await rig.settle()
    samples = await scrape(rig)
    for name in (
        "gha_controller_pending_ephemeral_runners",
        "gha_controller_running_ephemeral_runners",
        "gha_controller_failed_ephemeral_runners",
    ):
        assert [set(labels) for labels in samples[name]] == [ARC_GAUGE_LABELS]
    assert not any(
        key.startswith("otel_") for series in samples.values() for s in series for key in s
    )


async def test_errors_are_zero_before_the_first_error(rig: Rig) -> None:
    """controller-runtime starts each controller's error counter at 0, so rate() reads 0."""
    samples = await scrape(rig)
    controllers = {s["controller"] for s in samples["controller_runtime_reconcile_errors_total"]}
    assert controllers == {"ephemeralrunner", "ephemeralrunnerset", "runnernamespace"}


async def test_rest_client_requests_match_what_the_server_answered(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    await rig.registered(2)
    await rig.settle()
    log = rig.kube.requests
    text = rig.metrics()
    created = log.count(verb="create", user=CONTROLLER_USER, code=201)
    assert created > 0
    assert metric(text, "rest_client_requests_total", method="POST", code="201") == created
    patched = log.count(verb="patch", user=CONTROLLER_USER, code=200)
    assert metric(text, "rest_client_requests_total", method="PATCH", code="200") == patched


@pytest.mark.parametrize("rig_options", [ALL])
async def test_running_listeners_carry_arcs_labels(rig: Rig) -> None:
    """The dashboard's "running listeners" panel, served once an AutoscalingRunnerSet has a
    listener whose container runs."""
    await create_ars(rig)
    await converged(rig)

    async def running() -> list[dict[str, str]] | None:
        series = (await scrape(rig)).get("gha_controller_running_listeners")
        return series or None

    [labels] = await rig.until(running, what="gha_controller_running_listeners")
    assert set(labels) == ARC_GAUGE_LABELS
    assert labels["namespace"] == rig.system_namespace
