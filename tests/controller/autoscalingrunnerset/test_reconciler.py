"""The AutoscalingRunnerSet reconciler against the emulators, one ARC scenario per test
(docs/autoscaling.md#arcs-test-scenarios), with all four reconcilers running."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from dataclasses import replace

import pytest

from controller.autoscalingrunnerset.objects import ANNOTATION_LISTENER, listener_name
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from shared.kube.objects import EVENT, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT
from shared.typedefs import JSONDict
from tests.controller.autoscaling import (
    ALL,
    RUNNER_TEMPLATE,
    annotation,
    converged,
    create_ars,
    get_ars,
    listener_of,
    listeners,
    patch_ars,
    runner_set_of,
)
from tests.controller.conftest import FAST, IN_CLUSTER, Rig, RigOptions, metric

FINALIZER = "autoscalingrunnerset.actions.github.com/finalizer"
SOAK_SECONDS = float(os.environ.get("GHA_SOAK_SECONDS", "3"))


@pytest.fixture
def rig_options() -> RigOptions:
    return ALL


async def events_of(rig: Rig, name: str) -> list[str]:
    items = (await rig.objects.list(EVENT, rig.namespace))["items"]
    return [e["reason"] for e in items if e["involvedObject"]["name"] == name]


async def test_create_registers_the_scale_set_and_makes_runner_set_and_listener(rig: Rig) -> None:
    await create_ars(rig, runnerScaleSetName="fresh-set")
    ars, runner_set, listener = await converged(rig)
    meta = ars["metadata"]
    assert meta["finalizers"] == [FINALIZER]
    scale_set_id = int(meta["annotations"]["runner-scale-set-id"])
    registered = rig.gh.state.scale_sets[scale_set_id]
    assert registered.name == "fresh-set"
    assert [label["name"] for label in registered.labels] == ["fresh-set"]
    assert registered.runner_setting.get("disableUpdate") is True
    assert meta["annotations"]["actions.github.com/runner-group-name"] == "Default"
    assert meta["labels"]["actions.github.com/organization"] == "owner"
    assert meta["labels"]["actions.github.com/repository"] == "repo"
    assert runner_set["spec"]["replicas"] == 0
    assert runner_set["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == scale_set_id
    assert runner_set["metadata"]["ownerReferences"][0]["uid"] == meta["uid"]
    assert listener["spec"]["runnerScaleSetId"] == scale_set_id
    assert listener["spec"]["ephemeralRunnerSetName"] == "arc"
    assert listener["metadata"]["namespace"] == rig.system_namespace


async def test_an_existing_scale_set_of_that_name_is_reused(rig: Rig) -> None:
    """The rig registered `arc` in the Default group: it is found, not created again."""
    before = len(rig.gh.state.scale_sets)
    await create_ars(rig)
    ars, _, _ = await converged(rig)
    assert int(ars["metadata"]["annotations"]["runner-scale-set-id"]) == rig.scale_set_id
    assert len(rig.gh.state.scale_sets) == before
    assert ars["spec"]["runnerScaleSetName"] == "arc", "the defaulted name is persisted"


async def test_converged_set_makes_no_more_writes(rig: Rig) -> None:
    await create_ars(rig)
    _, runner_set, listener = await converged(rig)
    await rig.settle()
    again = await listener_of(rig)
    assert again is not None
    assert again["metadata"]["uid"] == listener["metadata"]["uid"]
    assert again["metadata"]["resourceVersion"] == listener["metadata"]["resourceVersion"]
    after = await runner_set_of(rig)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == runner_set["metadata"]["resourceVersion"]
    assert len(await listeners(rig)) == 1


async def test_runner_image_change_updates_the_runner_set_in_place(rig: Rig) -> None:
    await create_ars(rig)
    _, runner_set, listener = await converged(rig)
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:v2"}]}
    }
    await patch_ars(rig, {"spec": {"template": template}})

    async def updated() -> JSONDict | None:
        current = await runner_set_of(rig)
        spec = (current or {}).get("spec", {}).get("ephemeralRunnerSpec", {})
        return (
            current
            if spec.get("spec", {}).get("containers", [{}])[0].get("image") == "runner:v2"
            else None
        )

    current = await rig.until(updated, what="new image on the runner set")
    assert current["metadata"]["uid"] == runner_set["metadata"]["uid"]
    assert (
        current["spec"]["actionableRevision"] == runner_set["spec"].get("actionableRevision", 0) + 1
    )
    await rig.settle()
    same = await listener_of(rig)
    assert same is not None
    assert same["metadata"]["uid"] == listener["metadata"]["uid"]


async def test_reapplying_the_same_runner_spec_does_not_advance_the_revision(rig: Rig) -> None:
    await create_ars(rig)
    _, runner_set, _ = await converged(rig)
    await patch_ars(rig, {"spec": {"template": RUNNER_TEMPLATE, "minRunners": 0}})
    await patch_ars(rig, {"metadata": {"annotations": {"note": "re-applied"}}})
    await rig.settle()
    after = await runner_set_of(rig)
    assert after is not None
    assert after["spec"].get("actionableRevision") == runner_set["spec"].get("actionableRevision")


async def test_max_runners_change_recreates_the_listener_only(rig: Rig) -> None:
    await create_ars(rig)
    _, runner_set, listener = await converged(rig)
    await patch_ars(rig, {"spec": {"maxRunners": 9}})

    async def recreated() -> JSONDict | None:
        current = await listener_of(rig)
        return current if current and current["spec"]["maxRunners"] == 9 else None

    current = await rig.until(recreated, what="listener with maxRunners 9")
    assert current["metadata"]["uid"] != listener["metadata"]["uid"]
    after = await runner_set_of(rig)
    assert after is not None
    assert after["metadata"]["uid"] == runner_set["metadata"]["uid"]
    assert after["spec"].get("actionableRevision") == runner_set["spec"].get("actionableRevision")


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        pytest.param(
            {"metadata": {"labels": {"team": "blue"}}},
            lambda ers: ers["metadata"]["labels"].get("team") == "blue",
            id="set-label",
        ),
        pytest.param(
            {"spec": {"ephemeralRunnerSetMetadata": {"annotations": {"owner": "ci"}}}},
            lambda ers: ers["metadata"]["annotations"].get("owner") == "ci",
            id="runner-set-metadata",
        ),
        pytest.param(
            {"spec": {"ephemeralRunnerMetadata": {"labels": {"tier": "x"}}}},
            lambda ers: ers["spec"].get("ephemeralRunnerMetadata") == {"labels": {"tier": "x"}},
            id="runner-metadata",
        ),
    ],
)
async def test_metadata_changes_reach_the_runner_set(
    rig: Rig, patch: JSONDict, check: object
) -> None:
    await create_ars(rig)
    _, runner_set, _ = await converged(rig)
    await patch_ars(rig, patch)

    async def propagated() -> bool:
        current = await runner_set_of(rig)
        return current is not None and bool(check(current))  # type: ignore[operator]

    await rig.until(propagated, what="metadata on the runner set")
    after = await runner_set_of(rig)
    assert after is not None
    assert after["metadata"]["uid"] == runner_set["metadata"]["uid"]


async def test_config_secret_rename_updates_runner_set_and_recreates_listener(rig: Rig) -> None:
    token = rig.gh.add_pat()
    rig.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "other-secret", "namespace": rig.namespace},
            "data": {"github_token": base64.b64encode(token.encode()).decode()},
        }
    )
    await create_ars(rig)
    _, runner_set, listener = await converged(rig)
    await patch_ars(rig, {"spec": {"githubConfigSecret": "other-secret"}})

    async def moved() -> tuple[JSONDict, JSONDict] | None:
        current_set, current_listener = await runner_set_of(rig), await listener_of(rig)
        if not current_set or not current_listener:
            return None
        spec = current_set["spec"]["ephemeralRunnerSpec"]
        if spec["githubConfigSecret"] != "other-secret":
            return None
        if current_listener["spec"]["githubConfigSecret"] != "other-secret":
            return None
        return current_set, current_listener

    current_set, current_listener = await rig.until(moved, what="the new secret everywhere")
    assert current_set["metadata"]["uid"] == runner_set["metadata"]["uid"]
    assert current_listener["metadata"]["uid"] != listener["metadata"]["uid"]


async def test_credentials_github_refused_are_read_again_at_once(rig: Rig) -> None:
    """A GitHub Secret replaced after GitHub refused it (a rotated token, or a runner namespace
    re-created with a new Secret) is used on the next try, not after the client pool's
    five-minute trust in what it read (seen on a real cluster: the set stayed
    `AuthenticationFailed` until the controller restarted)."""

    def secret(token: str) -> JSONDict:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "rotated", "namespace": rig.namespace},
            "data": {"github_token": base64.b64encode(token.encode()).decode()},
        }

    rig.kube.apply(secret("ghp_revoked"))
    await create_ars(rig, githubConfigSecret="rotated")

    async def refused() -> bool:
        ars = await get_ars(rig) or {}
        conditions = (ars.get("status") or {}).get("conditions") or []
        return any(
            c["type"] == "ScaleSetRegistered" and c["reason"] == "AuthenticationFailed"
            for c in conditions
        )

    await rig.until(refused, what="the refusal")
    await rig.objects.patch(
        SECRET, rig.namespace, "rotated", {"data": secret(rig.gh.add_pat())["data"]}
    )
    await converged(rig)


async def test_runner_group_change_moves_the_scale_set_and_renames_the_listener(rig: Rig) -> None:
    group = rig.gh.state.add_runner_group("testgroup2")
    await create_ars(rig)
    ars, _, old_listener = await converged(rig)
    scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    await patch_ars(rig, {"spec": {"runnerGroup": "testgroup2"}})

    async def moved() -> JSONDict | None:
        current = await get_ars(rig)
        annotations = (current or {}).get("metadata", {}).get("annotations", {})
        return (
            current
            if annotations.get("actions.github.com/runner-group-name") == "testgroup2"
            else None
        )

    current = await rig.until(moved, what="the group annotation")
    assert rig.gh.state.scale_sets[scale_set_id].runner_group_id == group

    async def renamed() -> list[JSONDict] | None:
        names = [item["metadata"]["name"] for item in await listeners(rig)]
        return names if names == [listener_name(current)] else None

    await rig.until(renamed, what="only the renamed listener left")
    assert listener_name(current) != old_listener["metadata"]["name"]

    await patch_ars(
        rig, {"metadata": {"annotations": {"actions.github.com/runner-group-name": None}}}
    )

    async def restored() -> bool:
        group = annotation(await get_ars(rig), "actions.github.com/runner-group-name")
        return group == "testgroup2"

    await rig.until(restored, what="the group annotation written again")


async def test_scale_set_name_change_renames_it_on_github(rig: Rig) -> None:
    await create_ars(rig, runnerScaleSetName="testset")
    ars, _, _ = await converged(rig)
    scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    await patch_ars(rig, {"spec": {"runnerScaleSetName": "testset-update"}})

    async def renamed() -> bool:
        name = annotation(await get_ars(rig), "actions.github.com/runner-scale-set-name")
        return name == "testset-update"

    await rig.until(renamed, what="the name annotation")
    assert rig.gh.state.scale_sets[scale_set_id].name == "testset-update"


@pytest.mark.parametrize("rig_options", [RigOptions(controllers=IN_CLUSTER)])
async def test_status_copies_the_runner_set_counts(rig: Rig) -> None:
    """Without the EphemeralRunnerSet reconciler, which would write its own counts back."""
    await create_ars(rig)
    await converged(rig)
    await rig.objects.patch(
        EPHEMERAL_RUNNER_SET,
        rig.namespace,
        "arc",
        {
            "status": {
                "currentReplicas": 6,
                "pendingEphemeralRunners": 3,
                "runningEphemeralRunners": 2,
                "failedEphemeralRunners": 1,
            }
        },
        status=True,
    )

    async def mirrored() -> JSONDict | None:
        current = await get_ars(rig)
        status = (current or {}).get("status", {})
        return status if status.get("currentRunners") == 6 else None

    status = await rig.until(mirrored, what="counts on the AutoscalingRunnerSet")
    assert (
        status["phase"],
        status["pendingEphemeralRunners"],
        status["runningEphemeralRunners"],
        status["failedEphemeralRunners"],
    ) == ("Running", 3, 2, 1)


async def test_a_missing_secret_is_reported_and_deletion_still_completes(rig: Rig) -> None:
    await create_ars(rig, githubConfigSecret="no-such-secret")

    async def reported() -> JSONDict | None:
        current = await get_ars(rig)
        conditions = (current or {}).get("status", {}).get("conditions") or []
        return (
            current
            if any(c["type"] == "ScaleSetRegistered" and c["status"] == "False" for c in conditions)
            else None
        )

    current = await rig.until(reported, what="a False ScaleSetRegistered condition")
    assert current["metadata"]["finalizers"] == [FINALIZER]
    await rig.settle()
    # Retried with backoff, reported once: the Event goes with the condition's change.
    assert (await events_of(rig, "arc")).count("ScaleSetRegistrationFailed") == 1
    assert await runner_set_of(rig) is None
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, "arc")
    await rig.until(lambda: _gone(rig), what="the set gone")


async def _gone(rig: Rig, name: str = "arc") -> bool:
    return await get_ars(rig, name) is None


async def test_deletion_removes_listener_runner_set_and_scale_set(rig: Rig) -> None:
    await create_ars(rig, runnerScaleSetName="doomed")
    ars, _, _ = await converged(rig)
    scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, "arc")
    await rig.until(lambda: _gone(rig), what="the set gone")
    assert await runner_set_of(rig) is None
    assert await listeners(rig) == []
    assert scale_set_id not in rig.gh.state.scale_sets


async def test_deletion_lets_a_busy_runner_finish_first(rig: Rig) -> None:
    """The listener's part is played by the test: it scales the set and promotes the runner
    when the emulator assigned it a job."""
    rig.gh.state.require_acquire = False
    await create_ars(rig)
    await converged(rig)
    await rig.scale(1, 1)
    [runner] = await rig.registered(1)
    rid = runner["status"]["runnerId"]
    job = rig.gh.enqueue_job(labels=["arc"], duration=60)

    async def assigned() -> bool:
        found = rig.gh.state.runners.get(rid)
        return found is not None and found.job_id == job

    await rig.until(assigned, what="job assigned")
    await rig.set_status(runner["metadata"]["name"], phase="Running", jobId="j", jobRequestId=job)
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, "arc")
    await rig.until(lambda: _no_listeners(rig), what="listener deleted first")
    await rig.settle()
    assert await get_ars(rig) is not None, "held while the job runs"
    assert await rig.runner(runner["metadata"]["name"]) is not None, "busy runner kept"
    rig.gh.state.finish_job(job)
    await rig.until(lambda: _gone(rig), what="the set gone after the job")
    assert await rig.runners() == []
    assert await runner_set_of(rig) is None


async def _no_listeners(rig: Rig) -> bool:
    return await listeners(rig) == []


HELM_OBJECTS = [
    ("actions.github.com/cleanup-kubernetes-mode-role-binding-name", ROLE_BINDING, "arc-kube-mode"),
    ("actions.github.com/cleanup-kubernetes-mode-role-name", ROLE, "arc-kube-mode"),
    (
        "actions.github.com/cleanup-kubernetes-mode-service-account-name",
        SERVICE_ACCOUNT,
        "arc-kube-mode",
    ),
    (
        "actions.github.com/cleanup-no-permission-service-account-name",
        SERVICE_ACCOUNT,
        "arc-no-permission",
    ),
    ("actions.github.com/cleanup-github-secret-name", SECRET, "arc-github-secret"),
    ("actions.github.com/cleanup-manager-role-binding", ROLE_BINDING, "arc-manager"),
    ("actions.github.com/cleanup-manager-role-name", ROLE, "arc-manager"),
]


def _helm_object(kind_name: str, name: str, namespace: str) -> JSONDict:
    body: JSONDict = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "finalizers": ["actions.github.com/cleanup-protection"],
        },
    }
    if kind_name == "Role":
        body["rules"] = []
    if kind_name == "RoleBinding":
        body["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        body["subjects"] = []
    return body


async def test_helm_made_set_is_adopted_and_its_dependents_are_released_on_deletion(
    rig: Rig,
) -> None:
    """As ARC's Helm chart makes it: version label 0.14.x, cleanup annotations naming Helm's
    Roles, ServiceAccounts and Secret, each with `cleanup-protection`. Not deleted for its version
    label (ARC's gate would), and deleting it leaves nothing stuck Terminating."""
    for _, kind, name in HELM_OBJECTS:
        await rig.objects.create(kind, rig.namespace, _helm_object(kind.kind, name, rig.namespace))
    annotations = {annotation: name for annotation, _, name in HELM_OBJECTS}
    body = {
        "metadata": {
            "labels": {
                "app.kubernetes.io/version": "0.14.1",
                "app.kubernetes.io/managed-by": "Helm",
            },
            "annotations": {**annotations, "actions.github.com/values-hash": "abc"},
        }
    }
    await create_ars(rig)
    await patch_ars(rig, body)
    await converged(rig)
    await rig.settle()
    assert await get_ars(rig) is not None
    for _, kind, name in HELM_OBJECTS:
        await rig.objects.delete(kind, rig.namespace, name)
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, "arc")
    await rig.until(lambda: _gone(rig), what="the set gone")

    async def released() -> bool:
        left = [
            name
            for _, kind, name in HELM_OBJECTS
            if any(
                i["metadata"]["name"] == name
                for i in (await rig.objects.list(kind, rig.namespace))["items"]
            )
        ]
        return not left

    await rig.until(released, what="Helm's objects gone")


async def test_a_scale_set_deleted_on_github_is_registered_again(rig: Rig) -> None:
    await create_ars(rig, runnerScaleSetName="vanishing")
    ars, _, listener = await converged(rig)
    old = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    rig.gh.state.delete_scale_set(old)
    # A listener whose scale set is gone fails; its re-creation looks the scale set up again.
    await rig.objects.delete(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        listener["metadata"]["name"],
    )

    async def again() -> int | None:
        current = await get_ars(rig)
        value = (
            (current or {}).get("metadata", {}).get("annotations", {}).get("runner-scale-set-id")
        )
        return int(value) if value and int(value) != old else None

    new = await rig.until(again, what="a new scale set id")
    assert rig.gh.state.scale_sets[new].name == "vanishing"
    assert "ScaleSetMissing" in await events_of(rig, "arc")


async def test_docker_run_annotation_means_no_listener(rig: Rig) -> None:
    await create_ars(rig)
    await converged(rig)
    await patch_ars(rig, {"metadata": {"annotations": {ANNOTATION_LISTENER: "docker-run"}}})
    await rig.until(lambda: _no_listeners(rig), what="the listener removed")
    await rig.settle()
    assert await listeners(rig) == []
    assert await runner_set_of(rig) is not None


async def test_an_outdated_runner_image_parks_the_set_without_churn(rig: Rig) -> None:
    await create_ars(rig)
    _, runner_set, _ = await converged(rig)
    rig.gh.state.runner_version_deprecated = True
    await rig.scale(1, 1)

    async def outdated() -> JSONDict | None:
        current = await get_ars(rig)
        return current if (current or {}).get("status", {}).get("phase") == "Outdated" else None

    current = await rig.until(outdated, within=20, what="the set Outdated")
    conditions = {c["type"]: c for c in current["status"]["conditions"]}
    assert conditions["RunnersUpToDate"]["reason"] == "RunnerOutdated"
    assert "RunnerOutdated" in await events_of(rig, "arc")
    await rig.until(lambda: _no_listeners(rig), what="listener stopped")
    await rig.settle()
    # The soak: ARC deletes and re-creates the runner set and the listener in a loop here. Its
    # length is the one place this test waits on the clock (GHA_SOAK_SECONDS=300 for the
    # several-minute run of docs/autoscaling.md#outdated-without-churn).
    log = rig.kube.requests
    made = log.count(verb="create", resource="autoscalinglisteners") + log.count(
        verb="create", resource="ephemeralrunnersets"
    )
    await asyncio.sleep(SOAK_SECONDS)
    assert (
        log.count(verb="create", resource="autoscalinglisteners")
        + log.count(verb="create", resource="ephemeralrunnersets")
        == made
    )
    assert log.count(verb="delete", resource="ephemeralrunnersets") == 0
    held = await runner_set_of(rig)
    assert held is not None
    assert held["metadata"]["uid"] == runner_set["metadata"]["uid"]
    assert held["spec"]["replicas"] == 0
    assert await listeners(rig) == []
    assert (await events_of(rig, "arc")).count("RunnerOutdated") == 1
    rig.gh.state.runner_version_deprecated = False
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:v3"}]}
    }
    await patch_ars(rig, {"spec": {"template": template}})
    resumed, again, _ = await converged(rig)
    assert again["metadata"]["uid"] == runner_set["metadata"]["uid"]
    assert resumed["status"]["phase"] == "Running"


async def test_a_scale_set_name_taken_in_another_group_is_reported(rig: Rig) -> None:
    """The rig registered `arc` in the Default group; asking for it in another group cannot
    work until the name or the group changes, and `kubectl describe` says why."""
    rig.gh.state.add_runner_group("other")
    await create_ars(rig, runnerGroup="other")

    async def reported() -> JSONDict | None:
        conditions = ((await get_ars(rig)) or {}).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "ScaleSetRegistered"), None)

    condition = await rig.until(reported, what="the ScaleSetRegistered condition")
    assert condition["status"] == "False"
    assert (
        condition["message"] == "GitHub answered 409: A runner scale set named arc already exists."
    )
    await rig.settle()
    # Each retry gets the same message (no request ids in it), so one Event.
    assert (await events_of(rig, "arc")).count("ScaleSetRegistrationFailed") == 1
    assert await runner_set_of(rig) is None


async def test_azure_key_vault_credentials_are_refused_with_the_alternative(rig: Rig) -> None:
    vault = {"url": "https://v", "tenantId": "t", "clientId": "c", "certificatePath": "/c.pem"}
    await create_ars(rig, vaultConfig={"type": "azure_key_vault", "azureKeyVault": vault})

    async def reported() -> JSONDict | None:
        conditions = ((await get_ars(rig)) or {}).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "ScaleSetRegistered"), None)

    condition = await rig.until(reported, what="the ScaleSetRegistered condition")
    assert (condition["status"], condition["reason"]) == ("False", "VaultNotSupported")
    assert "spec.githubConfigSecret" in condition["message"]
    assert "VaultNotSupported" in await events_of(rig, "arc")
    assert await runner_set_of(rig) is None
    assert len(rig.gh.state.scale_sets) == 1, "nothing registered beyond the rig's own"


async def test_every_decision_is_logged_with_the_sets_key_and_uid(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.autoscalingrunnerset.reconciler")
    await create_ars(rig)
    ars, _, listener = await converged(rig)
    key, uid = f"{rig.namespace}/arc", ars["metadata"]["uid"]
    lines = [
        (record.getMessage(), getattr(record, "key", None), getattr(record, "uid", None))
        for record in caplog.records
        if record.name == "controller.autoscalingrunnerset.reconciler"
    ]
    said = [message for message, *tagged in lines if tagged == [key, uid]]
    assert len(said) == len(lines), "every line names the set"
    plans = [message for message in said if message.startswith(f"{key}: plan: ")]
    for decision in (
        "adding the finalizer",
        "runnerScaleSetName defaulted to arc",
        f"scale set {rig.scale_set_id} recorded",
        f"creating the EphemeralRunnerSet for scale set {rig.scale_set_id}",
        f"creating AutoscalingListener {listener['metadata']['name']}",
    ):
        assert any(decision in message for message in plans), decision


async def test_a_condition_decided_in_a_pass_that_writes_no_status_is_written_later(
    rig: Rig,
) -> None:
    """A fixed name and a new runner image in one edit: the pass that turns `NamesValid` True
    ends at the runner set's new revision, before the set's write. The condition is written by
    the next pass (it used to be remembered as written, and stayed False)."""
    await create_ars(rig)
    await converged(rig)
    # Annotations have no schema: the controller's name check is the one there is.
    cleanup = "actions.github.com/cleanup-manager-role-name"
    await patch_ars(rig, {"metadata": {"annotations": {cleanup: "../evil"}}})

    async def names(status: str) -> bool:
        conditions = ((await get_ars(rig)) or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "NamesValid" and c["status"] == status for c in conditions)

    await rig.until(lambda: names("False"), what="NamesValid False")
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "runner", "image": "runner:v2"}]}
    }
    await patch_ars(
        rig, {"metadata": {"annotations": {cleanup: None}}, "spec": {"template": template}}
    )
    await rig.until(lambda: names("True"), what="NamesValid True")


@pytest.mark.parametrize(
    "rig_options",
    # The Secret is read again at once, as by a controller that was restarted meanwhile.
    [replace(ALL, settings=FAST.model_copy(update={"credentials_ttl_seconds": 0.01}))],
)
async def test_a_scale_set_left_on_github_is_logged_at_warning_and_counted(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The GitHub Secret goes first (as in a namespace deletion): the set still goes, and its
    scale set, which stays registered, is said at WARNING (the Event may be refused by a
    terminating namespace) and counted."""
    caplog.set_level(logging.WARNING, logger="controller.autoscalingrunnerset.reconciler")
    await create_ars(rig, runnerScaleSetName="doomed")
    ars, _, _ = await converged(rig)
    scale_set_id = int(ars["metadata"]["annotations"]["runner-scale-set-id"])
    await rig.objects.delete(SECRET, rig.namespace, "github-secret")
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, "arc")
    await rig.until(lambda: _gone(rig), what="the set gone")
    assert scale_set_id in rig.gh.state.scale_sets
    [record] = [r for r in caplog.records if "could not be deleted on GitHub" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert f"scale set {scale_set_id} ('doomed')" in record.getMessage()
    assert "ScaleSetLeftOnGitHub" in await events_of(rig, "arc")
    left = metric(
        rig.metrics(),
        "gha_controller_scale_sets_left_behind_total",
        name="arc",
        namespace=rig.namespace,
        repository="repo",
        organization="owner",
    )
    assert left == 1


async def hold_finalizer(rig: Rig, name: str, *, add: str = "", remove: str = "") -> None:
    """Add or remove one finalizer of a listener, keeping the others."""
    current = await rig.objects.get(AUTOSCALING_LISTENER, rig.system_namespace, name)
    finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != remove]
    patch = {"finalizers": [*finalizers, add] if add else finalizers}
    await rig.objects.patch(
        AUTOSCALING_LISTENER,
        rig.system_namespace,
        name,
        {"metadata": {**patch, "resourceVersion": current["metadata"]["resourceVersion"]}},
    )


async def test_an_upgrade_reads_pending_with_a_new_change_hash_until_the_listener_is_made(
    rig: Rig,
) -> None:
    """ARC 0.14.2's phase (docs/autoscaling.md#phase): a new spec writes
    `actions.github.com/change-hash` and `Pending`, which tools waiting on the phase read until
    a pass finds the listener made with it, then `Running`. The old listener is held
    terminating by a test finalizer, so `Pending` lasts until the test lets it go."""
    hold = "test.example/hold"
    await create_ars(rig)
    ars, _, listener = await converged(rig)
    before = annotation(ars, "actions.github.com/change-hash")
    assert before is not None
    await hold_finalizer(rig, listener["metadata"]["name"], add=hold)
    await patch_ars(rig, {"spec": {"maxRunners": 9}})

    async def pending() -> JSONDict | None:
        current = await get_ars(rig)
        return current if (current or {}).get("status", {}).get("phase") == "Pending" else None

    upgrading = await rig.until(pending, what="the set Pending")
    assert annotation(upgrading, "actions.github.com/change-hash") not in (None, before)
    await rig.settle()
    assert (await get_ars(rig) or {})["status"]["phase"] == "Pending"
    await hold_finalizer(rig, listener["metadata"]["name"], remove=hold)
    _, _, made = await converged(rig)
    assert made["spec"]["maxRunners"] == 9
