"""The EphemeralRunnerSet reconciler through the emulators: ARC's scenarios for it
(docs/reconcilers.md#arcs-test-scenarios), the patch-id protocol and the newer upstream rules
(docs/reconcilers.md#ephemeralrunnerset).

As in ARC's tests, only the EphemeralRunnerSet controller runs: each test writes runner phases
and ids itself, and strips the finalizers of the runners the set deletes (the EphemeralRunner
controller would remove them).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from controller.runners.objects import proxy_secret_name
from shared.api.kinds import AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import EVENT, Kind
from shared.typedefs import JSONDict
from tests.controller.conftest import FAST, Rig, RigOptions, metric

NAMESPACE = Kind("Namespace", "namespaces", namespaced=False)


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunnerset",), kubelet=False)


def names(runners: list[JSONDict]) -> set[str]:
    return {r["metadata"]["name"] for r in runners}


def phase_of(runner: JSONDict) -> str:
    return str((runner.get("status") or {}).get("phase") or "")


async def set_phase(rig: Rig, runner: JSONDict, phase: str, runner_id: int = 0) -> None:
    status: JSONDict = {"phase": phase}
    if runner_id:
        status["runnerId"] = runner_id
    await rig.set_status(runner["metadata"]["name"], **status)


async def converge(rig: Rig, n: int) -> list[JSONDict]:
    """Wait for `n` live runners, letting deleted ones go, then for the controllers to idle."""

    async def probe() -> bool:
        await rig.strip_finalizers()
        live = await rig.live_runners()
        deleting = len(await rig.runners()) - len(live)
        return len(live) == n and deleting == 0

    await rig.until(probe, what=f"{n} runners")
    await rig.settle()
    await rig.strip_finalizers()
    return await rig.live_runners()


async def status_is(rig: Rig, **expected: Any) -> JSONDict:
    seen: list[JSONDict] = [{}]

    async def probe() -> JSONDict | None:
        status = (await rig.runner_set()).get("status") or {}
        seen[0] = status
        return status if all(status.get(k) == v for k, v in expected.items()) else None

    try:
        result: JSONDict = await rig.until(probe, what=f"status {expected}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; status {seen[0]}") from None
    return result


async def test_create_adds_finalizer_and_scales_to_replicas(rig: Rig) -> None:
    await rig.create_runner_set()
    await rig.settle()
    ers = await rig.runner_set()
    assert ers["metadata"]["finalizers"] == ["ephemeralrunnerset.actions.github.com/finalizer"]
    assert await rig.runners() == []
    assert ers["status"]["currentReplicas"] == 0
    await rig.scale(5, 1)
    runners = await converge(rig, 5)
    for i, runner in enumerate(runners):
        await set_phase(rig, runner, "Running", runner_id=100 + i)
    await status_is(rig, currentReplicas=5, runningEphemeralRunners=5, phase="Running")


async def test_new_runner_carries_patch_id_revision_labels_and_owner(rig: Rig) -> None:
    created = await rig.create_runner_set(replicas=1, patch_id=7)
    [runner] = await converge(rig, 1)
    meta = runner["metadata"]
    assert meta["generateName"] == "arc-runner-"
    assert meta["annotations"]["actions.github.com/patch-id"] == "7"
    assert meta["annotations"]["actions.github.com/actionable-revision"] == "0"
    assert meta["labels"]["app.kubernetes.io/component"] == "runner"
    assert meta["finalizers"] == [
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ]
    [owner] = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "EphemeralRunnerSet",
        created["metadata"]["uid"],
        True,
        True,
    )


async def test_delete_removes_idle_runners_then_the_set(rig: Rig) -> None:
    await rig.create_runner_set(replicas=5)
    runners = await converge(rig, 5)
    for i, runner in enumerate(runners):
        await set_phase(rig, runner, "Pending", runner_id=100 + i)
    await rig.settle()
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def gone() -> bool:
        await rig.strip_finalizers()
        sets = await rig.objects.list(EPHEMERAL_RUNNER_SET, rig.namespace)
        return not sets["items"] and not await rig.runners()

    await rig.until(gone, what="set and runners gone")
    removed = {
        r.path.rsplit("/", 1)[-1]
        for r in rig.gh.state.requests
        if r.method == "DELETE" and "/agents/" in r.path
    }
    assert removed == {str(100 + i) for i in range(5)}


async def test_delete_waits_for_busy_runners(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2)
    idle, busy = await converge(rig, 2)
    await set_phase(rig, idle, "Pending", runner_id=101)
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=102, jobId="j")
    await rig.settle()
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")
    [left] = await converge(rig, 1)
    assert left["metadata"]["name"] == busy["metadata"]["name"]
    assert (await rig.runner_set())["metadata"]["deletionTimestamp"]
    await set_phase(rig, left, "Succeeded")

    async def gone() -> bool:
        await rig.strip_finalizers()
        return not (await rig.objects.list(EPHEMERAL_RUNNER_SET, rig.namespace))["items"]

    await rig.until(gone, what="set gone")


async def test_set_annotations_reach_new_runners_only(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, metadata={"annotations": {"team": "initial"}})
    [first] = await converge(rig, 1)
    await rig.objects.patch(
        EPHEMERAL_RUNNER_SET,
        rig.namespace,
        "arc",
        {"metadata": {"annotations": {"team": "updated", "extra": "new"}}},
    )
    await rig.scale(2, 1)
    runners = await converge(rig, 2)
    by_name = {r["metadata"]["name"]: r["metadata"]["annotations"] for r in runners}
    assert by_name.pop(first["metadata"]["name"])["team"] == "initial"
    [second] = by_name.values()
    assert (second["team"], second["extra"]) == ("updated", "new")


async def test_scale_up_on_new_patch_id(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1)
    await converge(rig, 1)
    await rig.scale(2, 1)
    await converge(rig, 2)


async def test_served_patch_id_is_not_served_twice(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    runners = await converge(rig, 2)
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, runners[0]["metadata"]["name"])
    await converge(rig, 1)


async def test_finished_runners_are_cleaned_when_the_patch_id_changes(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    done, busy = await converge(rig, 2)
    await set_phase(rig, done, "Succeeded")
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=7, jobId="j")
    assert len(await converge(rig, 2)) == 2
    await rig.scale(1, 2)
    [left] = await converge(rig, 1)
    assert left["metadata"]["name"] == busy["metadata"]["name"]
    await status_is(rig, finishedRunnerCleanupPatchID=2)


async def test_finished_runner_is_kept_while_the_patch_id_is_unchanged(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    done, _ = await converge(rig, 2)
    await set_phase(rig, done, "Succeeded")
    runners = await converge(rig, 2)
    assert {phase_of(r) for r in runners} == {"Succeeded", ""}


async def test_cleanup_gap_is_not_filled_until_the_next_patch(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """Appendix B: the listener's count under patch 2 may not yet reflect the finished job. The
    set's log says why it does not scale up."""
    caplog.set_level(logging.INFO, logger="controller.ephemeralrunnerset")
    await rig.create_runner_set(replicas=2, patch_id=1)
    done, busy = await converge(rig, 2)
    await set_phase(rig, done, "Succeeded")
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=7, jobId="j")
    await rig.settle()
    await rig.scale(3, 2)
    [left] = await converge(rig, 1)
    assert phase_of(left) == "Running"
    # Said by the cleanup's pass, or when the cache still shows the runner finished, by the pass
    # its going wakes, a deferred wake (docs/controller-runtime.md#deferred-wakes).
    await rig.settle(deferred=True)
    assert any("no scale-up to 3 under patch id 2" in r.getMessage() for r in caplog.records), (
        caplog.text
    )
    await rig.scale(3, 3)
    runners = await converge(rig, 3)
    assert "Succeeded" not in {phase_of(r) for r in runners}


async def test_scale_down_with_patch_id_keeps_pending_runner(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    done, pending = await converge(rig, 2)
    await set_phase(rig, done, "Succeeded")
    await set_phase(rig, pending, "Pending", runner_id=5)
    await rig.settle()
    await rig.scale(0, 2)
    [left] = await converge(rig, 1)
    assert left["metadata"]["name"] == pending["metadata"]["name"]
    await set_phase(rig, left, "Succeeded")
    await converge(rig, 0)


async def test_patch_zero_scales_down_registered_idle_runners_only(rig: Rig) -> None:
    """The `Running` runner has no job, so it is idle and goes too. This test used to keep it
    (`Running` was taken to mean busy), but a runner ARC made is `Running` as soon as its pod
    runs, so after moving over from ARC no idle runner would ever have been scaled down."""
    await rig.create_runner_set(replicas=3, patch_id=1)
    pending, running, unregistered = await converge(rig, 3)
    await set_phase(rig, pending, "Pending")
    await set_phase(rig, running, "Running")
    await set_phase(rig, unregistered, "Pending")
    await rig.settle()
    await rig.scale(0, 0)
    assert len(await converge(rig, 3)) == 3
    await set_phase(rig, pending, "Pending", runner_id=11)
    await set_phase(rig, running, "Running", runner_id=12)
    left = await converge(rig, 1)
    assert names(left) == {unregistered["metadata"]["name"]}


async def test_idle_running_runners_go_after_pending_ones_and_busy_ones_stay(rig: Rig) -> None:
    """As ARC leaves them: idle runners `Running`; a busy one may carry only `jobRequestId`."""
    await rig.create_runner_set(replicas=4, patch_id=1)
    pending, idle, busy, request_only = await converge(rig, 4)
    await set_phase(rig, pending, "Pending", runner_id=21)
    await set_phase(rig, idle, "Running", runner_id=22)
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=23, jobId="j")
    await rig.set_status(request_only["metadata"]["name"], phase="Running", runnerId=24)
    await rig.set_status(request_only["metadata"]["name"], jobRequestId=77)
    await rig.settle()
    await rig.scale(3, 0)
    left = await converge(rig, 3)
    assert names(left) == names([idle, busy, request_only])
    await rig.scale(1, 0)
    left = await converge(rig, 2)
    assert names(left) == names([busy, request_only])
    removed = {
        r.path.rsplit("/", 1)[-1]
        for r in rig.gh.state.requests
        if r.method == "DELETE" and "/agents/" in r.path
    }
    assert removed == {"21", "22"}


async def test_scale_down_skips_runner_the_service_says_is_busy(rig: Rig) -> None:
    """The cache may not show JobStarted yet; removal from the service is the last guard."""
    await rig.create_runner_set(replicas=1, patch_id=1)
    [runner] = await converge(rig, 1)
    job = rig.gh.enqueue_job(labels=["arc"], duration=60)
    assert job
    registered, _ = rig.gh.state.generate_jit_config(rig.scale_set_id, name="x", work_folder="")
    registered.job_id = job
    await set_phase(rig, runner, "Pending", runner_id=registered.id)
    await rig.settle()
    await rig.scale(0, 0)
    await rig.settle()
    assert names(await rig.live_runners()) == {runner["metadata"]["name"]}
    registered.job_id = None
    await set_phase(rig, runner, "Succeeded")
    await converge(rig, 0)


async def test_patch_zero_replaces_finished_runners(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    done, busy = await converge(rig, 2)
    await set_phase(rig, done, "Succeeded")
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=7, jobId="j")
    await rig.settle()
    await rig.scale(2, 0)
    runners = await converge(rig, 2)
    assert "Succeeded" not in {phase_of(r) for r in runners}


async def test_revision_change_replaces_idle_runners_and_lets_busy_finish(rig: Rig) -> None:
    await rig.create_runner_set(replicas=3)
    first, second, busy = await converge(rig, 3)
    await set_phase(rig, first, "Pending", runner_id=101)
    await set_phase(rig, second, "Pending", runner_id=102)
    await rig.set_status(
        busy["metadata"]["name"], phase="Running", runnerId=103, jobId="j", workflowRunId=9
    )
    await rig.settle()
    await rig.patch_spec(
        {
            "actionableRevision": 1,
            "ephemeralRunnerSpec": {
                "spec": {"containers": [{"name": "runner", "image": "runner:v2"}]}
            },
        }
    )
    runners = await converge(rig, 3)
    by_name = {r["metadata"]["name"]: r for r in runners}
    kept = by_name.pop(busy["metadata"]["name"])
    assert kept["spec"]["spec"]["containers"][0]["image"] == "runner:latest"
    for new in by_name.values():
        assert new["spec"]["spec"]["containers"][0]["image"] == "runner:v2"
        assert new["metadata"]["annotations"]["actions.github.com/actionable-revision"] == "1"
    await status_is(rig, appliedActionableRevision=1, finishedRunnerCleanupPatchID=0)


def image_of(runner: JSONDict) -> str:
    return str(runner["spec"]["spec"]["containers"][0]["image"])


V2_TEMPLATE: JSONDict = {
    "restartPolicy": "Never",
    "containers": [{"name": "runner", "image": "runner:v2"}],
}


async def test_editing_the_runner_spec_of_a_set_alone_replaces_its_idle_runners(rig: Rig) -> None:
    """Without an AutoscalingRunnerSet the set advances its own revision on a spec change."""
    await rig.create_runner_set(replicas=3, patch_id=1)
    first, second, busy = await converge(rig, 3)
    await set_phase(rig, first, "Pending", runner_id=101)
    await set_phase(rig, second, "Running", runner_id=102)
    await rig.set_status(busy["metadata"]["name"], phase="Running", runnerId=103, jobId="j")
    await rig.settle()
    await rig.patch_spec({"ephemeralRunnerSpec": {"spec": V2_TEMPLATE}})
    await status_is(rig, appliedActionableRevision=1)
    assert (await rig.runner_set())["spec"]["actionableRevision"] == 1
    [left] = await converge(rig, 1)
    assert left["metadata"]["name"] == busy["metadata"]["name"]
    await rig.scale(3, 2)
    runners = await converge(rig, 3)
    by_name = {r["metadata"]["name"]: r for r in runners}
    assert image_of(by_name.pop(busy["metadata"]["name"])) == "runner:latest"
    assert {image_of(r) for r in by_name.values()} == {"runner:v2"}
    assert {
        r["metadata"]["annotations"]["actions.github.com/actionable-revision"]
        for r in by_name.values()
    } == {"1"}
    assert "actions.github.com/runner-spec-hash" not in runners[0]["metadata"]["annotations"]
    # Applying the same spec again is no change.
    rig.kube.requests.reset()
    await rig.patch_spec({"ephemeralRunnerSpec": {"spec": V2_TEMPLATE}})
    await rig.settle()
    assert rig.kube.requests.count(verb="delete", resource="ephemeralrunners") == 0
    assert (await rig.runner_set())["spec"]["actionableRevision"] == 1


async def test_edited_runner_spec_takes_an_outdated_set_out_of_outdated(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    [outdated] = await converge(rig, 1)
    await set_phase(rig, outdated, "Outdated", runner_id=22)
    await status_is(rig, phase="Outdated")
    await converge(rig, 0)
    await rig.patch_spec({"ephemeralRunnerSpec": {"spec": V2_TEMPLATE}})
    await status_is(rig, phase="Running", appliedActionableRevision=1)
    await rig.scale(2, 2)
    runners = await converge(rig, 2)
    assert {image_of(r) for r in runners} == {"runner:v2"}


async def test_an_older_revision_recycles_no_runner(rig: Rig) -> None:
    """Re-applying a manifest with an older `actionableRevision` is no revision change."""
    await rig.create_runner_set()
    await rig.patch_spec({"actionableRevision": 2})
    await status_is(rig, appliedActionableRevision=2)
    await rig.scale(2, 1)
    runners = await converge(rig, 2)
    for i, runner in enumerate(runners):
        await set_phase(rig, runner, "Pending", runner_id=300 + i)
    await rig.settle()
    rig.kube.requests.reset()
    await rig.patch_spec({"actionableRevision": 1})
    await rig.settle()
    assert rig.kube.requests.count(verb="delete", resource="ephemeralrunners") == 0
    assert names(await rig.live_runners()) == names(runners)
    assert (await rig.runner_set())["status"]["appliedActionableRevision"] == 2


async def test_first_scale_set_id_on_a_set_without_runners_recycles_nothing(rig: Rig) -> None:
    """The listener writes the scale set id it found into a set that has no runners yet, then
    scales: the runners are built once, from the spec with the id."""
    await rig.create_runner_set()
    await rig.patch_spec({"ephemeralRunnerSpec": {"runnerScaleSetId": 0}})
    await rig.settle()
    rig.kube.requests.reset()
    await rig.patch_spec({"ephemeralRunnerSpec": {"runnerScaleSetId": rig.scale_set_id}})
    await rig.scale(2, 1)
    runners = await converge(rig, 2)
    assert {r["spec"]["runnerScaleSetId"] for r in runners} == {rig.scale_set_id}
    assert rig.kube.requests.count(verb="create", resource="ephemeralrunners") == 2
    assert rig.kube.requests.count(verb="delete", resource="ephemeralrunners") == 0
    ers = await rig.runner_set()
    assert ers["spec"].get("actionableRevision", 0) == 0
    assert ers["metadata"]["annotations"]["actions.github.com/runner-spec-hash"]


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunnerset",),
            kubelet=False,
            settings=FAST.model_copy(
                update={
                    "failed_runner_replace_delay_seconds": 600.0,
                    "failed_runner_replace_delay_max_seconds": 600.0,
                }
            ),
        )
    ],
)
async def test_status_counts_by_phase(rig: Rig) -> None:
    """The `Running` runner has a job, so the scale-down to 0 keeps it (an idle `Running` runner
    would go: test_patch_zero_scales_down_registered_idle_runners_only)."""
    await rig.create_runner_set(replicas=3)
    pending, running, failed = await converge(rig, 3)
    await set_phase(rig, pending, "Pending", runner_id=101)
    await rig.set_status(running["metadata"]["name"], phase="Running", runnerId=102, jobId="j")
    await set_phase(rig, failed, "Failed", runner_id=103)
    await status_is(
        rig,
        phase="Running",
        currentReplicas=3,
        pendingEphemeralRunners=1,
        runningEphemeralRunners=1,
        failedEphemeralRunners=1,
    )
    await rig.scale(0, 0)
    await status_is(
        rig,
        currentReplicas=2,
        pendingEphemeralRunners=0,
        runningEphemeralRunners=1,
        failedEphemeralRunners=1,
    )
    text = rig.metrics()
    labels = {"name": "arc", "namespace": rig.namespace, "organization": "owner"}
    assert metric(text, "gha_controller_failed_ephemeral_runners", **labels) == 1
    assert metric(text, "gha_controller_running_ephemeral_runners", **labels) == 1
    assert metric(text, "gha_controller_pending_ephemeral_runners", **labels) == 0
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, failed["metadata"]["name"])
    await rig.strip_finalizers()
    await status_is(rig, currentReplicas=1, failedEphemeralRunners=0, phase="Running")


async def test_failed_runner_is_reported_then_replaced_with_backoff(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    [runner] = await converge(rig, 1)
    await rig.set_status(
        runner["metadata"]["name"],
        phase="Failed",
        runnerId=9,
        reason="TooManyPodFailures",
        failures={"uid-1": "2026-01-01T00:00:00Z"},
    )
    [replacement] = await rig.until(
        lambda: replaced(rig, runner), what="the failed runner replaced"
    )
    annotations = replacement["metadata"]["annotations"]
    assert annotations["gha-runner-scaler/failed-runner-replacements"] == "1"
    assert annotations["actions.github.com/patch-id"] == "1"
    assert metric(rig.metrics(), "gha_controller_failed_ephemeral_runner_replacements_total") == 1
    events = await rig.objects.list(EVENT, rig.namespace)
    assert any(e["reason"] == "ReplacingFailedRunner" for e in events["items"])


async def replaced(rig: Rig, failed: JSONDict) -> list[JSONDict] | None:
    await rig.strip_finalizers()
    live = await rig.live_runners()
    everything = await rig.runners()
    if len(live) == 1 and len(everything) == 1 and names(live) != names([failed]):
        return live
    return None


async def test_outdated_runner_makes_the_set_outdated_and_stops_scaling(rig: Rig) -> None:
    await rig.create_runner_set(replicas=2, patch_id=1)
    outdated, idle = await converge(rig, 2)
    await set_phase(rig, idle, "Pending", runner_id=21)
    await set_phase(rig, outdated, "Outdated", runner_id=22)
    await status_is(rig, phase="Outdated")
    await converge(rig, 0)
    await rig.scale(3, 2)
    await rig.settle()
    assert await rig.runners() == []
    assert (await rig.runner_set())["status"]["phase"] == "Outdated"
    await rig.patch_spec({"actionableRevision": 1})
    await status_is(rig, phase="Running", appliedActionableRevision=1)
    await rig.scale(3, 3)
    await converge(rig, 3)


async def test_stale_outdated_runner_is_replaced_without_making_the_set_outdated(
    rig: Rig,
) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    [old] = await converge(rig, 1)
    await rig.set_status(old["metadata"]["name"], phase="Running", runnerId=3, jobId="j")
    await rig.patch_spec({"actionableRevision": 1})
    await status_is(rig, appliedActionableRevision=1)
    await set_phase(rig, old, "Outdated")
    await rig.scale(1, 2)
    [new] = await converge(rig, 1)
    assert new["metadata"]["annotations"]["actions.github.com/actionable-revision"] == "1"
    assert (await rig.runner_set())["status"]["phase"] == "Running"


async def test_proxy_secret_and_runner_reference(rig: Rig) -> None:
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "proxy-credentials", "namespace": rig.namespace},
            "stringData": {"username": "test", "password": "password"},
        }
    )
    await rig.create_runner_set(
        replicas=1,
        proxy={
            "http": {
                "url": "http://proxy.example.com:3128",
                "credentialSecretRef": "proxy-credentials",
            },
            "https": {"url": "http://proxy.example.com:3129"},
            "noProxy": ["example.com", "example.org"],
        },
    )
    [runner] = await converge(rig, 1)
    ref = runner["spec"]["proxySecretRef"]
    assert ref == proxy_secret_name(set_name="arc", namespace=rig.namespace)
    secret = await rig.secret(ref)
    assert secret is not None
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {
        "http_proxy": "http://test:password@proxy.example.com:3128",
        "https_proxy": "http://proxy.example.com:3129",
        "no_proxy": "example.com,example.org",
    }


async def test_runners_get_the_sets_github_server_tls(rig: Rig) -> None:
    tls = {"certificateFrom": {"configMapKeyRef": {"name": "ca", "key": "rootCA.crt"}}}
    await rig.create_runner_set()
    await rig.patch_spec({"ephemeralRunnerSpec": {"githubServerTLS": tls}})
    await rig.scale(1, 1)
    [runner] = await converge(rig, 1)
    assert runner["spec"]["githubServerTLS"] == tls


async def test_scale_down_takes_the_next_candidate_when_one_took_a_job(rig: Rig) -> None:
    await rig.create_runner_set(replicas=3, patch_id=1)
    runners = await converge(rig, 3)
    ordered = sorted(
        runners, key=lambda r: (r["metadata"]["creationTimestamp"], r["metadata"]["name"])
    )
    jobs = []
    for runner in ordered:
        registered, _ = rig.gh.state.generate_jit_config(
            rig.scale_set_id, name=runner["metadata"]["name"], work_folder=""
        )
        jobs.append(registered)
        await set_phase(rig, runner, "Pending", runner_id=registered.id)
    jobs[0].job_id = rig.gh.enqueue_job(labels=["arc"], duration=60)
    await rig.settle()
    await rig.scale(1, 0)
    [left] = await converge(rig, 1)
    assert left["metadata"]["name"] == ordered[0]["metadata"]["name"]
    assert [r.id in rig.gh.state.runners for r in jobs] == [True, False, False]


@pytest.mark.parametrize("patch_id", [0, 1])
async def test_a_burst_is_created_exactly_once_despite_cache_lag(rig: Rig, patch_id: int) -> None:
    """Runners created in one pass count in the next even before the cache has them."""
    await rig.create_runner_set()
    await rig.settle()
    rig.kube.requests.reset()
    await rig.scale(30, patch_id)
    await converge(rig, 30)
    await rig.settle()
    assert rig.kube.requests.count(verb="create", resource="ephemeralrunners") == 30
    assert rig.kube.requests.count(verb="delete", resource="ephemeralrunners") == 0


async def test_a_scale_down_deletes_exactly_the_surplus_despite_cache_lag(rig: Rig) -> None:
    await rig.create_runner_set(replicas=30, patch_id=1)
    runners = await converge(rig, 30)
    for i, runner in enumerate(runners):
        await set_phase(rig, runner, "Pending", runner_id=1000 + i)
    await rig.settle()
    rig.kube.requests.reset()
    await rig.scale(10, 0)
    await converge(rig, 10)
    assert rig.kube.requests.count(verb="delete", resource="ephemeralrunners") == 20
    assert rig.kube.requests.count(verb="create", resource="ephemeralrunners") == 0


async def test_deletion_also_drops_the_finalizer_arc_0_14_2_put_on_sets(rig: Rig) -> None:
    await rig.create_runner_set(
        metadata={"finalizers": ["ephemeralrunner.actions.github.com/finalizer"]}
    )

    async def ours_added() -> bool:
        finalizers = (await rig.runner_set())["metadata"].get("finalizers") or []
        return "ephemeralrunnerset.actions.github.com/finalizer" in finalizers

    await rig.until(ours_added, what="finalizer added")
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def gone() -> bool:
        return not (await rig.objects.list(EPHEMERAL_RUNNER_SET, rig.namespace))["items"]

    await rig.until(gone, what="set gone")


def acts_dropped(rig: Rig) -> float:
    return metric(
        rig.metrics(), "gha_runtime_predicate_dropped_total", watch="ephemeralrunnerset-acts"
    )


async def test_a_listener_patch_the_set_would_do_nothing_about_wakes_nothing(rig: Rig) -> None:
    """The listener's patches at maxRunners, or after a job whose runner has not gone yet, leave
    nothing to do: no runner to add (none missing) and none to remove (a non-zero patch id).
    They used to wake the set each time, 1.9 of its 3.5 passes per runner on the default
    workload (docs/reconcilers.md#wakes-per-runner). A patch that leaves a runner missing wakes
    it."""
    await rig.create_runner_set(replicas=2, patch_id=1)
    first, _ = await converge(rig, 2)
    before = rig.reconciles("ephemeralrunnerset")
    await rig.scale(2, 2)  # a job offered at maxRunners: a new id, the same count
    await rig.scale(1, 3)  # a job finished, its runner not gone yet
    await rig.settle()
    assert rig.reconciles("ephemeralrunnerset") == before
    assert acts_dropped(rig) == 2
    # The finished job's runner goes: under patch 3 nothing is missing (1 of 1).
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, first["metadata"]["name"])
    await converge(rig, 1)
    # A job offered: one runner missing under a new id, so the patch wakes the set.
    await rig.scale(2, 4)
    await converge(rig, 2)
    assert acts_dropped(rig) == 2


async def test_a_listener_patch_during_a_pass_wakes_the_set_again(rig: Rig) -> None:
    """A pass decides on the spec it read: a patch arriving meanwhile is judged after it, even
    one that would change nothing against the runners cached so far (here the pass is still
    creating the runners that the settled patch asks to remove)."""
    await rig.create_runner_set(replicas=1, patch_id=1)
    await converge(rig, 1)
    slow = rig.kube.faults.latency(0.5, verb="create", resource="ephemeralrunners")
    await rig.scale(3, 2)

    async def in_pass() -> bool:
        text = rig.metrics()
        return (
            metric(text, "controller_runtime_active_workers", controller="ephemeralrunnerset") > 0
        )

    await rig.until(in_pass, what="the scale-up's pass")
    wakes = rig.wakes("ephemeralrunnerset", fields=False)["ephemeralrunnerset update"]
    await rig.scale(1, 0)  # against 1 cached runner and none created yet: nothing to do
    await rig.settle()
    rig.kube.faults.remove(slow)
    assert rig.wakes("ephemeralrunnerset", fields=False)["ephemeralrunnerset update"] == wakes + 1
    assert acts_dropped(rig) == 0


def gone_wakes(rig: Rig) -> int:
    return rig.wakes("ephemeralrunnerset", fields=False)[
        "ephemeralrunner-to-ephemeralrunnerset delete"
    ]


async def test_a_runner_going_wakes_its_set_only_when_its_slot_is_wanted(rig: Rig) -> None:
    """A runner being deleted is in no count and holds its slot until gone (docs/reconcilers.md
    #wakes-per-runner): its going changes the set's decision only when the slot is wanted and
    may be refilled. After the listener's count went down it wakes nothing (it used to, 0.96
    wakes per runner on the default workload); when the listener's patch came while the runner
    still held its slot, its going is what refills the slot."""
    await rig.create_runner_set(replicas=2, patch_id=1)
    first, second = await converge(rig, 2)
    await rig.scale(1, 2)  # the job of `first` completed
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, first["metadata"]["name"])
    await converge(rig, 1)
    await rig.settle(deferred=True)
    assert gone_wakes(rig) == 0
    # A job offered while `second` is being deleted: its slot counts until it is gone.
    await rig.scale(2, 3)
    await converge(rig, 2)
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, second["metadata"]["name"])
    await rig.settle(deferred=True)
    await rig.scale(2, 4)  # `second` still holds its slot: nothing to do, no wake
    await rig.settle()
    await rig.strip_finalizers()
    await converge(rig, 2)
    assert gone_wakes(rig) == 1


async def test_a_set_runs_at_most_the_max_runners_of_its_autoscaling_runner_set(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A listener's token may write any replicas (docs/security.md#identities): a set its
    AutoscalingRunnerSet owns never runs more than that set's maxRunners."""
    ars = await rig.objects.create(
        AUTOSCALING_RUNNER_SET,
        rig.namespace,
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "arc", "namespace": rig.namespace},
            "spec": {
                "githubConfigUrl": rig.config_url,
                "githubConfigSecret": "github-secret",
                "maxRunners": 3,
                "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
            },
        },
    )
    owner = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "name": "arc",
        "uid": ars["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    await rig.create_runner_set(metadata={"ownerReferences": [owner]})
    with caplog.at_level(logging.WARNING):
        await rig.scale(1000, 1)
        assert len(await converge(rig, 3)) == 3
    assert "replicas=1000 is above the AutoscalingRunnerSet's maxRunners=3" in caplog.text
    await rig.objects.patch(
        AUTOSCALING_RUNNER_SET, rig.namespace, "arc", {"spec": {"maxRunners": 5}}
    )
    await rig.scale(1000, 2)
    assert len(await converge(rig, 5)) == 5


async def test_a_namespace_being_deleted_refuses_one_create_and_no_more_are_sent(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 41: on a real control plane, during a namespace's deletion a set sent every missing
    runner on each pass (53 refused creates in half a second for 10 runners). The namespace
    controller here sweeps a namespace at once; a real one takes seconds per kind, so the sweep
    is held back and the set sees its namespace terminating before its own deletion."""
    caplog.set_level(logging.INFO, logger="controller.ephemeralrunnerset")
    await rig.create_runner_set(replicas=0)
    await rig.settle()
    monkeypatch.setattr(rig.kube.controllers, "_sweep_namespace", lambda name: None)
    await rig.objects.delete(NAMESPACE, None, rig.namespace)
    rig.kube.requests.reset()

    await rig.scale(10, 1)
    await rig.settle()
    # The listener goes on asking while the namespace is being deleted.
    await rig.scale(10, 2)
    await rig.settle()
    await rig.scale(12, 3)
    await rig.settle()

    creates = [
        r for r in rig.kube.requests.log if r.verb == "create" and r.resource == "ephemeralrunners"
    ]
    assert [r.code for r in creates] == [403]
    said = [r for r in caplog.records if "is being deleted and refused" in r.getMessage()]
    assert len(said) == 1
    assert "9 create(s) of this pass not sent" in said[0].getMessage()
