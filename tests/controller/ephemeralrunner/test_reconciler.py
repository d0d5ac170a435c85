"""The EphemeralRunner reconciler through the emulators: ARC's scenarios for it
(docs/reconcilers.md#arcs-test-scenarios) and this project's changes.

Only the EphemeralRunner controller runs, on runners created directly (as ARC's tests do), and
no kubelet: each test writes the runner pod's status the way a kubelet would, so one pod state
is exercised at a time.
"""

from __future__ import annotations

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER
from shared.kube.objects import EVENT, POD
from shared.typedefs import JSONDict
from tests.controller.conftest import CONTROLLER_USER, FAST, Rig, RigOptions

HOOKS_TEMPLATE: JSONDict = {
    "initContainers": [{"name": "setup", "image": "busybox"}],
    "containers": [
        {
            "name": "runner",
            "image": "runner:latest",
            "env": [{"name": "ACTIONS_RUNNER_CONTAINER_HOOKS", "value": "/hooks/index.js"}],
        }
    ],
    "volumes": [{"name": "work", "emptyDir": {}}],
}


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=("ephemeralrunner",), kubelet=False)


def running(ready: bool = True) -> JSONDict:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"name": "runner", "ready": ready, "state": {"running": {}}}],
    }


def exited(code: int, *, phase: str = "Running", reason: str = "") -> JSONDict:
    status: JSONDict = {
        "phase": phase,
        "containerStatuses": [
            {"name": "runner", "state": {"terminated": {"exitCode": code, "reason": "Error"}}}
        ],
    }
    if reason:
        status["reason"] = reason
    return status


def failed_without_container(reason: str = "") -> JSONDict:
    status: JSONDict = {"phase": "Failed"}
    if reason:
        status.update(reason=reason, message=f"The node was low on resource: {reason}")
    return status


INIT_FAILED: JSONDict = {
    "phase": "Pending",
    "initContainerStatuses": [
        {"name": "setup", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    ],
}


async def one_runner(rig: Rig, *, template: JSONDict | None = None) -> tuple[str, JSONDict]:
    created = await rig.create_runner(template=template)
    name = created["metadata"]["name"]
    await rig.registered(1)
    pod = await rig.until(lambda: rig.pod(name), what="pod")
    return name, pod


async def busy(rig: Rig, name: str) -> None:
    runner = await rig.runner(name)
    assert runner is not None
    await rig.job_started(runner)


async def new_pod(rig: Rig, name: str, old: JSONDict) -> JSONDict:
    async def probe() -> JSONDict | None:
        pod = await rig.pod(name)
        return pod if pod and pod["metadata"]["uid"] != old["metadata"]["uid"] else None

    result: JSONDict = await rig.until(probe, what="a new pod")
    return result


async def gone(rig: Rig, name: str) -> None:
    async def probe() -> bool:
        return await rig.runner(name) is None

    await rig.until(probe, what=f"runner {name} deleted")


async def failures(rig: Rig, name: str, n: int) -> JSONDict:
    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        count = len(((runner or {}).get("status") or {}).get("failures") or {})
        return runner if count == n else None

    result: JSONDict = await rig.until(probe, what=f"{n} failures")
    return result


async def phase(rig: Rig, name: str, expected: str) -> JSONDict:
    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        return runner if ((runner or {}).get("status") or {}).get("phase") == expected else None

    result: JSONDict = await rig.until(probe, what=f"phase {expected}")
    return result


async def test_creation_sets_both_finalizers_secret_pod_and_runner_id(rig: Rig) -> None:
    name, pod = await one_runner(rig)
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["metadata"]["finalizers"] == [
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ]
    assert runner["status"]["runnerId"] > 0
    assert runner["status"]["runnerName"] == name
    assert runner["status"]["phase"] == "Pending"
    secret = await rig.secret(name)
    assert secret is not None
    assert secret["data"]["jitToken"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == runner["metadata"]["uid"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == runner["metadata"]["uid"]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"]["secretKeyRef"] == {
        "name": name,
        "key": "jitToken",
    }
    assert runner["status"]["runnerId"] in rig.gh.state.runners


async def test_deleted_pod_is_recreated_without_counting_a_failure(rig: Rig) -> None:
    name, pod = await one_runner(rig)
    await rig.objects.delete(POD, rig.namespace, name)
    await new_pod(rig, name, pod)
    runner = await rig.runner(name)
    assert runner is not None
    assert not runner["status"].get("failures")


@pytest.mark.parametrize(
    "status",
    [exited(1), failed_without_container(), INIT_FAILED, failed_without_container("Evicted")],
    ids=["runner-exit-1", "failed-no-container-status", "init-container-failed", "evicted"],
)
async def test_busy_runner_whose_pod_fails_is_deleted(rig: Rig, status: JSONDict) -> None:
    name, _ = await one_runner(rig)
    await busy(rig, name)
    rig.job_finished(await rig.runner(name) or {})
    await rig.pod_status(name, status)
    await gone(rig, name)


@pytest.mark.parametrize(
    "status",
    [
        failed_without_container(),
        INIT_FAILED,
        exited(1, phase="Failed"),
        exited(1),
        failed_without_container("Evicted"),
        failed_without_container("OutOfpods"),
    ],
    ids=[
        "failed-no-container-status",
        "init-failed",
        "pod-failed-exit-1",
        "exit-1",
        "evicted",
        "outofpods",
    ],
)
async def test_idle_runner_failure_is_counted_and_pod_recreated(rig: Rig, status: JSONDict) -> None:
    name, pod = await one_runner(rig)
    await rig.pod_status(name, status)
    runner = await failures(rig, name, 1)
    assert pod["metadata"]["uid"] in runner["status"]["failures"]
    assert runner["status"]["phase"] == "Pending"
    await new_pod(rig, name, pod)


@pytest.mark.parametrize("job", [True, False], ids=["busy", "idle"])
@pytest.mark.parametrize("pod_phase", ["Failed", "Succeeded", "Running"])
async def test_runner_exit_zero_deletes_the_runner_at_once(
    rig: Rig, job: bool, pod_phase: str
) -> None:
    """A runner whose container exits 0 goes in the pass that sees it, as in upstream ARC's newer
    source (docs/reconcilers.md#a-runner-that-succeeded): one
    delete and one finalizer removal, no status write, and its pod and JIT Secret go with it
    through the garbage collector. It used to be marked `Succeeded` for its set to delete: one
    request and one pass more per job."""
    name, _ = await one_runner(rig)
    if job:
        await busy(rig, name)
    runner = await rig.runner(name) or {}
    await rig.settle()
    rig.kube.requests.reset()
    if job:
        # The service's side of the job is over when the runner exits, so the finalizer can
        # unregister it.
        rig.job_finished(runner)
    await rig.pod_status(name, exited(0, phase=pod_phase))
    await gone(rig, name)

    async def cleaned() -> bool:
        return await rig.pod(name) is None and await rig.secret(name) is None

    await rig.until(cleaned, what="pod and JIT secret gone with the runner")
    # (The runner-namespace controller's RoleBinding requests, when the last runner goes, are
    # not the runner's.)
    requests = {
        call: count
        for call, count in rig.controller_requests().items()
        if not call.endswith("rolebindings")
    }
    assert requests == {"delete ephemeralrunners": 1, "patch ephemeralrunners": 1}, requests
    # The service no longer knows it: unregistered (or found gone) by the finalizer.
    assert runner["status"]["runnerId"] not in rig.gh.state.runners


async def test_exit_seven_is_outdated_and_unregistered(rig: Rig) -> None:
    name, _ = await one_runner(rig)
    runner = await rig.runner(name)
    assert runner is not None
    rid = runner["status"]["runnerId"]
    await rig.pod_status(name, exited(7))
    outdated = await phase(rig, name, "Outdated")
    assert outdated["status"]["reason"] == "Outdated"
    assert outdated["status"]["message"] == "Runner is deprecated"
    assert rid not in rig.gh.state.runners


@pytest.mark.parametrize(
    ("status", "server_message"),
    [
        (422, "injected fault on create pods"),
        (403, "forbidden: injected fault on create pods"),
    ],
)
async def test_pod_creation_rejected_marks_failed_invalid_pod(
    rig: Rig, status: int, server_message: str
) -> None:
    rig.kube.faults.inject(verb="create", resource="pods", status=status)
    runner = await rig.create_runner()
    failed = await phase(rig, runner["metadata"]["name"], "Failed")
    assert failed["status"]["reason"] == "InvalidPod"
    assert failed["status"]["message"] == f"Failed to create the pod: {server_message}"
    assert failed["status"]["runnerId"] not in rig.gh.state.runners


async def test_deletion_removes_pod_secret_and_hook_resources(rig: Rig) -> None:
    name, _ = await one_runner(rig, template=HOOKS_TEMPLATE)
    runner = await rig.runner(name)
    assert runner is not None
    rid = runner["status"]["runnerId"]
    hook_pod = rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-workflow",
                "namespace": rig.namespace,
                "labels": {"runner-pod": name},
            },
            "spec": {"containers": [{"name": "job", "image": "node"}]},
        }
    )
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"{name}-workflow",
                "namespace": rig.namespace,
                "labels": {"runner-pod": name},
            },
        }
    )
    assert hook_pod
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, name)
    await gone(rig, name)
    assert await rig.pod(name) is None
    assert await rig.secret(name) is None
    assert await rig.pod(f"{name}-workflow") is None
    assert await rig.secret(f"{name}-workflow") is None
    assert rid not in rig.gh.state.runners


async def test_deletion_waits_while_the_service_says_the_job_runs(rig: Rig) -> None:
    name, _ = await one_runner(rig)
    await busy(rig, name)
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, name)
    await rig.until(lambda: refused_removal(rig), what="a refused removal")
    assert await rig.runner(name) is not None
    rig.job_finished(await rig.runner(name) or {})
    await gone(rig, name)


async def refused_removal(rig: Rig) -> bool:
    return any(r.method == "DELETE" and r.status == 400 for r in rig.gh.state.requests)


@pytest.mark.parametrize(
    ("statuses", "ready"),
    [
        ([running(ready=True)], True),
        ([running(ready=True), running(ready=False)], False),
        ([{"phase": "Running"}], False),
        ([running(ready=True), {**running(ready=True), "phase": "Succeeded"}], True),
        (
            [
                running(),
                {
                    "phase": "Pending",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [{"name": "runner", "state": {"waiting": {}}}],
                },
            ],
            False,
        ),
    ],
    ids=["ready", "ready-then-not", "no-container-status", "succeeded-but-running", "back-pending"],
)
async def test_runner_stays_pending_and_ready_follows_the_pod(
    rig: Rig, statuses: list[JSONDict], ready: bool
) -> None:
    name, _ = await one_runner(rig)
    for status in statuses:
        await rig.pod_status(name, status)

    async def probe() -> JSONDict | None:
        runner = await rig.runner(name)
        return runner if bool((runner or {}).get("status", {}).get("ready")) == ready else None

    await rig.until(probe, what=f"ready={ready}")
    await rig.settle()
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["status"]["phase"] == "Pending"
    assert bool(runner["status"].get("ready")) is ready


async def test_running_ready_runner_is_pending_until_job_started(rig: Rig) -> None:
    name, _ = await one_runner(rig)
    await rig.pod_status(name, running(ready=True))

    async def ready() -> bool:
        runner = await rig.runner(name)
        return bool((runner or {}).get("status", {}).get("ready"))

    await rig.until(ready, what="ready")
    await rig.settle()
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["status"]["phase"] == "Pending"
    await busy(rig, name)
    await rig.settle()
    runner = await rig.runner(name)
    assert runner is not None
    assert runner["status"]["phase"] == "Running"
    assert runner["status"]["jobId"] == "job-1"


async def test_consecutive_failures_end_in_failed_after_the_maximum(rig: Rig) -> None:
    name, pod = await one_runner(rig)
    for attempt in range(1, 6):
        await rig.pod_status(name, exited(1))
        await failures(rig, name, attempt)
        pod = await new_pod(rig, name, pod)
    await rig.pod_status(name, exited(1))
    failed = await phase(rig, name, "Failed")
    assert len(failed["status"]["failures"]) == 6
    assert failed["status"]["reason"] == "TooManyPodFailures"
    assert failed["status"]["runnerId"] not in rig.gh.state.runners

    async def cleaned() -> bool:
        return await rig.pod(name) is None and await rig.secret(name) is None

    await rig.until(cleaned, what="pod and secret of the failed runner deleted")


async def test_busy_runner_whose_pod_vanishes_fails(rig: Rig) -> None:
    """It used to be deleted without a word; now it fails with the cause, and its set replaces
    it (each cause: test_reconciler_lost_pod.py)."""
    name, _ = await one_runner(rig)
    await busy(rig, name)
    rig.job_finished(await rig.runner(name) or {})
    await rig.objects.delete(POD, rig.namespace, name)

    async def failed() -> JSONDict | None:
        runner = await rig.runner(name)
        return runner if runner and runner["status"].get("phase") == "Failed" else None

    runner = await rig.until(failed, what="runner failed")
    assert runner["status"]["reason"] == "PodDeleted"


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunner",),
            kubelet=False,
            settings=FAST.model_copy(update={"registration_removal_timeout_seconds": 0.5}),
        )
    ],
)
async def test_deletion_stops_waiting_for_the_job_after_the_timeout(rig: Rig) -> None:
    name, _ = await one_runner(rig)
    await busy(rig, name)
    await rig.objects.delete(EPHEMERAL_RUNNER, rig.namespace, name)
    await gone(rig, name)
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    assert {e["reason"] for e in events} == {"RegistrationLeftBehind"}


@pytest.mark.parametrize(
    "rig_options",
    [
        RigOptions(
            controllers=("ephemeralrunner",),
            kubelet=False,
            settings=FAST.model_copy(update={"pod_start_timeout_seconds": 0.5}),
        )
    ],
)
async def test_pod_stuck_pulling_its_image_counts_as_failed(rig: Rig) -> None:
    name, pod = await one_runner(rig)
    await rig.pod_status(
        name,
        {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "runner", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
            ],
        },
    )
    runner = await failures(rig, name, 1)
    assert runner["status"]["reason"] == "ImagePullBackOff"
    await new_pod(rig, name, pod)


async def test_name_taken_in_the_same_scale_set_is_freed_and_registered_again(rig: Rig) -> None:
    stale, _ = rig.gh.state.generate_jit_config(rig.scale_set_id, name="runner-x", work_folder="")
    await rig.create_runner(name="runner-x")
    [runner] = await rig.registered(1)
    assert runner["status"]["runnerId"] != stale.id
    assert stale.id not in rig.gh.state.runners


async def test_name_taken_in_another_scale_set_deletes_the_runner(rig: Rig) -> None:
    other = rig.gh.state.create_scale_set(
        name="other", runner_group_id=1, labels=[], runner_setting={}
    )
    rig.gh.state.generate_jit_config(other.id, name="runner-y", work_folder="")
    await rig.create_runner(name="runner-y")
    await gone(rig, "runner-y")
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    assert {e["reason"] for e in events} == {"RunnerNameTaken"}


@pytest.mark.parametrize("rig_options", [RigOptions(kubelet=False)], ids=["with-the-set"])
async def test_a_runner_this_process_created_costs_no_secret_read(rig: Rig) -> None:
    """Its JIT Secret cannot exist before this process makes it (issue: every runner started
    with a Secret GET that answered 404). A runner found otherwise (made by another process, or
    before a restart) is still read first: its Secret may exist."""

    def runner_secret_reads() -> list[str]:
        return [
            r.path.rsplit("/", 1)[1]
            for r in rig.kube.requests.log
            if (r.verb, r.resource, r.user) == ("get", "secrets", CONTROLLER_USER)
            and not r.path.endswith("/github-secret")  # the GitHub credentials
        ]

    rig.kube.requests.reset()
    await rig.create_runner_set(replicas=2, patch_id=1)
    await rig.registered(2)
    assert runner_secret_reads() == []
    assert rig.kube.requests.count(verb="create", resource="secrets", user=CONTROLLER_USER) == 2
    # One made by someone else: read first.
    await rig.create_runner(name="stranger")
    await rig.registered(3)
    assert runner_secret_reads() == ["stranger"]
