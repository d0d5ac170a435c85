"""Each EphemeralRunnerSet owns one PodDisruptionBudget over its busy runner pods
(docs/reconcilers.md#busy-pods): made with the controller's identity and RBAC, kept as the set
needs it, never someone else's taken over, gone with the set or its namespace; the emulator's
disruption controller syncs it (never `SyncFailed`). What it refuses is the end-to-end test
tests/controller/test_drain.py."""

from __future__ import annotations

import pytest

from controller.runners.busy import BUDGET_MIN_AVAILABLE, LABEL_RUNNER_BUSY
from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.errors import NotFound
from shared.kube.names import NameRule
from shared.kube.objects import EVENT, POD_DISRUPTION_BUDGET, Kind
from shared.typedefs import JSONDict
from tests.controller.conftest import CONTROLLER_USER, FAST, Rig, RigOptions

KARPENTER = "karpenter.sh/do-not-disrupt"
NAMESPACE = Kind("Namespace", "namespaces", namespaced=False)


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(kubelet=False)


async def budget(rig: Rig, name: str = "arc") -> JSONDict | None:
    try:
        return await rig.objects.get(POD_DISRUPTION_BUDGET, rig.namespace, name)
    except NotFound:
        return None


async def budget_as_the_set_needs(rig: Rig, runner_set: JSONDict) -> JSONDict:
    uid = runner_set["metadata"]["uid"]

    async def probe() -> JSONDict | None:
        found = await budget(rig)
        spec = (found or {}).get("spec") or {}
        wanted = {
            "minAvailable": BUDGET_MIN_AVAILABLE,
            "selector": {
                "matchLabels": {"actions-ephemeral-runner": "True", LABEL_RUNNER_BUSY: uid}
            },
        }
        return (
            found
            if {k: spec.get(k) for k in ("minAvailable", "selector")} == wanted
            and ("maxUnavailable" not in spec)
            else None
        )

    result: JSONDict = await rig.until(probe, what="the set's budget as it needs it")
    return result


@pytest.mark.parametrize(
    "rig_options",
    [RigOptions(kubelet=False), RigOptions(kubelet=False, cluster_role=False)],
    ids=["cluster-role", "without-cluster-role"],
)
async def test_a_set_owns_one_budget_over_its_busy_pods(rig: Rig) -> None:
    runner_set = await rig.create_runner_set()
    found = await budget_as_the_set_needs(rig, runner_set)
    [owner] = found["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "EphemeralRunnerSet",
        "arc",
        runner_set["metadata"]["uid"],
        True,
    )
    assert found["metadata"]["labels"]["actions.github.com/scale-set-name"] == "arc"
    creates = [
        r
        for r in rig.kube.requests.log
        if r.resource == "poddisruptionbudgets" and r.verb == "create"
    ]
    assert [(r.user, r.code) for r in creates] == [(CONTROLLER_USER, 201)]

    async def synced() -> JSONDict | None:
        status = (await budget(rig) or {}).get("status") or {}
        return status if status.get("observedGeneration") else None

    # An integer minAvailable: the disruption controller needs no scale subresource of the
    # pods' owner, so the budget syncs (ARC's users' maxUnavailable budgets go SyncFailed).
    status = await rig.until(synced, what="the budget synced")
    assert "SyncFailed" not in [c.get("reason") for c in status.get("conditions") or []]
    assert status["disruptionsAllowed"] == 0


async def test_a_budget_changed_or_deleted_is_put_back(rig: Rig) -> None:
    runner_set = await rig.create_runner_set()
    await budget_as_the_set_needs(rig, runner_set)
    # A percentage or maxUnavailable makes the disruption controller ask the pods' owner for a
    # scale, which an EphemeralRunner has not: SyncFailed, and the budget protects nothing.
    await rig.objects.patch(
        POD_DISRUPTION_BUDGET,
        rig.namespace,
        "arc",
        {"spec": {"minAvailable": None, "maxUnavailable": "50%"}},
    )
    await budget_as_the_set_needs(rig, runner_set)
    await rig.objects.patch(
        POD_DISRUPTION_BUDGET,
        rig.namespace,
        "arc",
        {"spec": {"selector": {"matchLabels": {LABEL_RUNNER_BUSY: "other"}}}},
    )
    await budget_as_the_set_needs(rig, runner_set)
    await rig.objects.delete(POD_DISRUPTION_BUDGET, rig.namespace, "arc")
    await budget_as_the_set_needs(rig, runner_set)


async def test_a_budget_of_that_name_not_the_sets_is_left_alone(rig: Rig) -> None:
    """A tenant's object, even one whose owner reference names the set (kind and name, not its
    uid), is never patched or adopted; the set says so."""
    forged: JSONDict = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": "arc",
            "namespace": rig.namespace,
            "ownerReferences": [
                {
                    "apiVersion": "actions.github.com/v1alpha1",
                    "kind": "EphemeralRunnerSet",
                    "name": "arc",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        },
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "mine"}}},
    }
    await rig.objects.create(POD_DISRUPTION_BUDGET, rig.namespace, forged)
    await rig.create_runner_set()

    async def warned() -> list[JSONDict]:
        events = (await rig.objects.list(EVENT, rig.namespace))["items"]
        return [e for e in events if e["reason"] == "BusyRunnerBudgetTaken"]

    await rig.until(warned, what="a Warning Event")
    await rig.settle()
    found = await budget(rig)
    assert found is not None
    assert found["spec"]["selector"] == {"matchLabels": {"app": "mine"}}
    writes = [
        r
        for r in rig.kube.requests.log
        if r.resource == "poddisruptionbudgets" and r.user == CONTROLLER_USER
    ]
    assert [r.verb for r in writes if r.verb not in ("list", "watch")] == []


@pytest.mark.parametrize(
    "rig_options",
    [RigOptions(kubelet=False, settings=FAST.model_copy(update={"protect_busy_pods": False}))],
)
async def test_turned_off_no_budget(rig: Rig) -> None:
    await rig.create_runner_set(replicas=1, patch_id=1)
    await rig.registered(1)
    await rig.settle()
    assert await budget(rig) is None


async def test_the_budget_goes_with_its_set(rig: Rig) -> None:
    runner_set = await rig.create_runner_set()
    await budget_as_the_set_needs(rig, runner_set)
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def gone() -> bool:
        return await budget(rig) is None

    await rig.until(gone, what="the budget collected with the set")


async def test_nothing_is_left_when_the_namespace_goes(rig: Rig) -> None:
    runner_set = await rig.create_runner_set(replicas=2, patch_id=1)
    await budget_as_the_set_needs(rig, runner_set)
    await rig.registered(2)
    await rig.objects.delete(NAMESPACE, None, rig.namespace)

    async def gone() -> bool:
        try:
            await rig.objects.get(NAMESPACE, None, rig.namespace)
        except NotFound:
            return True
        return False

    await rig.until(gone, what="the namespace gone")
    assert await budget(rig) is None


@pytest.mark.parametrize("rig_options", [RigOptions()])
async def test_a_busy_pod_is_labelled_for_its_sets_budget_in_the_annotations_patch(
    rig: Rig,
) -> None:
    runner_set = await rig.create_runner_set(replicas=1, patch_id=1)
    [runner] = await rig.registered(1)
    name = runner["metadata"]["name"]

    async def pod_running() -> bool:
        pod = await rig.pod(name)
        return pod is not None and (pod.get("status") or {}).get("phase") == "Running"

    await rig.until(pod_running, what="runner pod running")
    await rig.settle()
    before = rig.controller_requests().get("patch pods", 0)
    await rig.job_started(runner)

    async def protected() -> JSONDict | None:
        pod = await rig.pod(name)
        meta = (pod or {}).get("metadata") or {}
        labelled = (meta.get("labels") or {}).get(LABEL_RUNNER_BUSY)
        annotated = KARPENTER in (meta.get("annotations") or {})
        return pod if labelled and annotated else None

    pod = await rig.until(protected, what="busy pod labelled and annotated")
    assert pod["metadata"]["labels"][LABEL_RUNNER_BUSY] == runner_set["metadata"]["uid"]
    await rig.settle()
    # One patch carries both.
    assert rig.controller_requests().get("patch pods", 0) - before == 1
    await rig.set_status(name, phase="Pending", jobId=None, jobRequestId=None)

    async def released() -> bool:
        found = await rig.pod(name)
        return LABEL_RUNNER_BUSY not in ((found or {})["metadata"].get("labels") or {})

    await rig.until(released, what="idle pod evictable again")
    await rig.settle()
    assert rig.controller_requests().get("patch pods", 0) - before == 2
    assert (await rig.pod(name) or {})["metadata"]["annotations"].get(KARPENTER) is None


CLUSTER_ROLE = Kind(
    "ClusterRole",
    "clusterroles",
    group="rbac.authorization.k8s.io",
    namespaced=False,
    names=NameRule.PATH_SEGMENT,
)


async def test_a_budget_refused_by_rbac_stops_no_scaling(rig: Rig) -> None:
    """An install upgraded without re-applying manifests/: the controller may not create the
    budget. The set says so and scales as before."""
    role = await rig.objects.get(CLUSTER_ROLE, None, "gha-controller-runner-namespace")
    rules = [r for r in role["rules"] if "poddisruptionbudgets" not in r["resources"]]
    await rig.objects.patch(CLUSTER_ROLE, None, role["metadata"]["name"], {"rules": rules})
    await rig.create_runner_set(replicas=2, patch_id=1)
    await rig.count_runners(2)

    async def warned() -> list[JSONDict]:
        events = (await rig.objects.list(EVENT, rig.namespace))["items"]
        return [e for e in events if e["reason"] == "BusyRunnerBudgetRefused"]

    [event] = await rig.until(warned, what="a Warning Event")
    assert "busy runners are not kept off drains" in event["message"]
    assert await budget(rig) is None


async def test_a_budget_in_another_namespace_naming_the_set_is_not_the_sets(rig: Rig) -> None:
    """A tenant of another namespace copies the set's owner reference (kind, name and uid) onto
    a budget of their own: owner references never cross namespaces, so the set neither adopts
    nor corrects it, and its own budget stays as it needs it."""
    runner_set = await rig.create_runner_set()
    await budget_as_the_set_needs(rig, runner_set)
    other = f"{rig.namespace}-tenant"
    await rig.objects.create(NAMESPACE, None, {"metadata": {"name": other}})
    [owner] = (await budget(rig) or {})["metadata"]["ownerReferences"]
    forged: JSONDict = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "arc", "namespace": other, "ownerReferences": [owner]},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "theirs"}}},
    }
    await rig.objects.create(POD_DISRUPTION_BUDGET, other, forged)
    # Its events reach the controller's handlers: a pass would run, on this namespace's set.
    await rig.objects.patch(POD_DISRUPTION_BUDGET, other, "arc", {"spec": {"maxUnavailable": 2}})
    await rig.settle()
    theirs = await rig.objects.get(POD_DISRUPTION_BUDGET, other, "arc")
    assert theirs["spec"]["maxUnavailable"] == 2
    writes = [
        r
        for r in rig.kube.requests.log
        if r.resource == "poddisruptionbudgets"
        and r.user == CONTROLLER_USER
        and r.verb not in ("list", "watch")
    ]
    assert [(r.verb, r.namespace) for r in writes] == [("create", rig.namespace)]
    await budget_as_the_set_needs(rig, runner_set)
