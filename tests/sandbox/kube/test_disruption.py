"""PodDisruptionBudgets (validation, the disruption controller's status) and the pods/eviction
subresource, through kubernetes-asyncio against the emulator."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.kube import KubeEmulator
from sandbox.kube.disruption import DISRUPTION_USER, budget_status, up_to_date
from sandbox.kube.store import Event
from tests.sandbox.kube.conftest import wait_for

Obj = dict[str, Any]
NS = "work"
PDBS = ("policy", "poddisruptionbudgets")
PODS = ("", "pods")
HUGE = 2147483647
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
async def apis(kube: KubeEmulator) -> AsyncIterator[tuple[client.CoreV1Api, client.PolicyV1Api]]:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    async with client.ApiClient(await kube.configuration()) as api:
        yield client.CoreV1Api(api), client.PolicyV1Api(api)


def pod(name: str, labels: dict[str, str] | None = None, owner: Obj | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": labels or {"app": "web"}}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def budget(name: str, **spec: Any) -> Obj:
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": spec,
    }


def ready(kube: KubeEmulator, name: str) -> Obj | None:
    obj = kube.store.get(PODS, NS, name)
    conditions = (obj or {}).get("status", {}).get("conditions") or []
    return obj if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None


async def ready_pods(kube: KubeEmulator, core: client.CoreV1Api, *names: str, **kw: Any) -> None:
    for name in names:
        await core.create_namespaced_pod(NS, pod(name, **kw))
    for name in names:
        await wait_for(partial(ready, kube, name))


def status_when(kube: KubeEmulator, name: str, check: Callable[[Obj], bool]) -> Callable[[], Obj]:
    def probe() -> Obj:
        obj = kube.store.get(PDBS, NS, name) or {}
        status = obj.get("status") or {}
        return status if status.get("conditions") and check(status) else {}

    return probe


def condition(status: Obj) -> Obj:
    found: Obj = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    return found


def eviction(name: str, **options: Any) -> client.V1Eviction:
    return client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=NS),
        delete_options=client.V1DeleteOptions(**options) if options else None,
    )


async def evict(core: client.CoreV1Api, name: str, **options: Any) -> Any:
    """The raw answer of a successful eviction (the typed client would read the Status as an
    Eviction)."""
    return await core.create_namespaced_pod_eviction(
        name, NS, eviction(name, **options), _preload_content=False
    )


async def refused(core: client.CoreV1Api, name: str) -> tuple[int, Obj, Any]:
    with pytest.raises(client.ApiException) as caught:
        await core.create_namespaced_pod_eviction(name, NS, eviction(name))
    return caught.value.status, json.loads(caught.value.body), caught.value.headers


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "spec",
            "minAvailable and maxUnavailable cannot be both set",
        ),
        ({"minAvailable": -1}, "spec.minAvailable", "Invalid value: -1: must be greater than"),
        (
            {"maxUnavailable": "abc"},
            "spec.maxUnavailable",
            'Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"abc"}: a valid percent',
        ),
        ({"minAvailable": "150%"}, "spec.minAvailable", "must not be greater than 100%"),
        (
            {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"},
            "spec.unhealthyPodEvictionPolicy",
            'Unsupported value: "Sometimes": supported values: "AlwaysAllow", "IfHealthyBudget"',
        ),
        (
            {
                "minAvailable": 1,
                "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]},
            },
            "spec.selector.matchExpressions[0].values",
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
    ],
)
async def test_an_invalid_budget_is_422_with_the_field(
    apis: tuple[client.CoreV1Api, client.PolicyV1Api], spec: Obj, field: str, message: str
) -> None:
    _, policy = apis
    body = budget("bad", **spec)
    with pytest.raises(client.ApiException) as caught:
        await policy.create_namespaced_pod_disruption_budget(NS, body)
    status = json.loads(caught.value.body)
    assert (caught.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"].startswith('PodDisruptionBudget.policy "bad" is invalid: ')
    cause = status["details"]["causes"][0]
    assert cause["field"] == field
    assert message in cause["message"]


async def test_a_new_budget_starts_with_an_empty_status_then_the_controller_fills_it(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    _, policy = apis
    created = await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=1))
    assert created.metadata.generation == 1
    assert created.status.disruptions_allowed == 0
    assert created.status.observed_generation is None
    status = await wait_for(status_when(kube, "b", lambda s: s.get("observedGeneration") == 1))
    assert (status["expectedPods"], status["currentHealthy"]) == (0, 0)
    assert condition(status)["reason"] == "InsufficientPods"


# --- the disruption controller -------------------------------------------------------------


async def test_integer_min_available_counts_the_matching_pods_without_owners(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "a", "b", "c")
    owner = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner", "uid": "u1"}
    await ready_pods(kube, core, "d", owner={**owner, "name": "d"})
    await policy.create_namespaced_pod_disruption_budget(NS, budget("some", minAvailable=1))
    status = await wait_for(status_when(kube, "some", lambda s: s["currentHealthy"] == 4))
    assert status["observedGeneration"] == 1
    assert (status["desiredHealthy"], status["expectedPods"], status["disruptionsAllowed"]) == (
        1,
        4,
        3,
    )
    assert (condition(status)["status"], condition(status)["reason"]) == ("True", "SufficientPods")

    await policy.patch_namespaced_pod_disruption_budget(
        "some", NS, {"spec": {"minAvailable": HUGE}}
    )
    status = await wait_for(status_when(kube, "some", lambda s: s["observedGeneration"] == 2))
    assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (HUGE, 0)
    assert (condition(status)["status"], condition(status)["reason"]) == (
        "False",
        "InsufficientPods",
    )
    assert condition(status)["observedGeneration"] == 2


async def test_a_budget_follows_its_pods(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=1))
    await ready_pods(kube, core, "a", "b")
    await wait_for(status_when(kube, "b", lambda s: s["disruptionsAllowed"] == 1))
    await core.patch_namespaced_pod("b", NS, {"metadata": {"labels": {"app": "other"}}})
    status = await wait_for(status_when(kube, "b", lambda s: s["expectedPods"] == 1))
    assert status["disruptionsAllowed"] == 0


async def test_pods_no_budget_selects_sync_no_budget(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """A sync of every budget on every pod event made a 2,000-runner benchmark measure this
    controller: a pod event syncs only the budgets selecting the pod before or after the
    write."""
    core, policy = apis
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=1))
    await wait_for(status_when(kube, "b", lambda s: "conditions" in s))
    before = kube.disruption.syncs
    names = [f"other-{i}" for i in range(10)]
    for name in names:
        await core.create_namespaced_pod(NS, pod(name, {"app": "other"}))
    await wait_for(lambda: all(ready(kube, name) for name in names))
    assert kube.disruption.syncs == before
    await core.patch_namespaced_pod("other-0", NS, {"metadata": {"labels": {"app": "web"}}})
    await wait_for(status_when(kube, "b", lambda s: s["expectedPods"] == 1))
    await core.patch_namespaced_pod("other-0", NS, {"metadata": {"labels": {"app": "other"}}})
    await wait_for(status_when(kube, "b", lambda s: s["expectedPods"] == 0))


async def test_a_sync_reads_the_pods_its_budget_selects_not_the_namespace(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """Each sync read every pod of the namespace: with a set's busy-pod budget, the emulator's
    CPU in a benchmark's jobs phase grew with the runners (45 ms per runner at 2,000). A sync
    now reads the pods its selection holds, kept from the pod events."""
    core, policy = apis
    others = [f"other-{i}" for i in range(20)]
    for name in others:
        await core.create_namespaced_pod(NS, pod(name, {"app": "other"}))
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=1))
    await ready_pods(kube, core, "a", "b")
    await wait_for(lambda: all(ready(kube, name) for name in others))
    await wait_for(status_when(kube, "b", lambda s: s["currentHealthy"] == 2))
    syncs, examined = kube.disruption.syncs, kube.disruption.examined

    await core.patch_namespaced_pod("a", NS, {"metadata": {"labels": {"tier": "front"}}})
    await wait_for(lambda: kube.disruption.syncs > syncs)

    assert kube.disruption.examined - examined == 2 * (kube.disruption.syncs - syncs)


async def test_max_unavailable_reads_the_deployment_scale(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    _, policy = apis
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    kube.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "web"}},
                "template": template,
            },
        }
    )
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", maxUnavailable="25%"))
    status = await wait_for(status_when(kube, "b", lambda s: s["currentHealthy"] == 4))
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        4,
        3,
        1,
    )


async def test_a_percentage_over_a_custom_resource_without_scale_fails_safe(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """ARC's case: the EphemeralRunner has no scale subresource, so the budget cannot count its
    expected pods; it stays at disruptionsAllowed 0 and, never observed, refuses evictions as
    still being processed."""
    core, policy = apis
    owner = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner", "uid": "u1"}
    await ready_pods(kube, core, "r", owner={**owner, "name": "r"})
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", maxUnavailable=0))
    status = await wait_for(
        status_when(kube, "b", lambda s: condition(s)["reason"] == "SyncFailed")
    )
    assert condition(status)["message"] == (
        "ephemeralrunners.actions.github.com does not implement the scale subresource"
    )
    assert (condition(status)["status"], status["disruptionsAllowed"]) == ("False", 0)
    assert "observedGeneration" not in status
    code, body, headers = await refused(core, "r")
    assert (code, body["reason"], body["message"]) == (429, "TooManyRequests", VIOLATION)
    assert body["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget b is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }
    assert headers["Retry-After"] == "10"


async def test_a_pod_without_a_found_controller_fails_the_percentage_budget(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "uid": "u2"}
    await ready_pods(kube, core, "p", owner=owner)
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable="50%"))
    status = await wait_for(
        status_when(kube, "b", lambda s: condition(s)["reason"] == "SyncFailed")
    )
    assert condition(status)["message"] == 'found no controllers for pod "p"'


# --- the disruption controller's requests --------------------------------------------------


def status_updates(kube: KubeEmulator) -> int:
    return kube.requests.count(
        verb="update",
        resource="poddisruptionbudgets",
        subresource="status",
        user=DISRUPTION_USER,
        namespace=NS,
        code=200,
    )


async def settled(kube: KubeEmulator, syncs: int) -> None:
    """Until the controller has run a sync after `syncs` (a sync runs to its end at once)."""
    await wait_for(lambda: kube.disruption.syncs > syncs)


async def test_a_busy_pod_costs_its_budget_one_status_update_when_labelled_one_when_gone(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """The real controller's `update poddisruptionbudgets/status` for the busy-pod budget, as
    kube-controller-manager 1.32 sent them (BENCHMARKS.md, "API load per job on a real control
    plane"): one per sync that changes the status, none for one that changes nothing."""
    core, policy = apis
    busy = {"app": "web", "busy": "yes"}
    await policy.create_namespaced_pod_disruption_budget(
        NS, budget("busy", minAvailable=HUGE, selector={"matchLabels": busy})
    )
    await ready_pods(kube, core, "p")
    await wait_for(status_when(kube, "busy", lambda s: s.get("observedGeneration") == 1))
    assert kube.requests.count(user=DISRUPTION_USER) == 0  # not counted unless asked
    kube.controllers.requests = kube.requests

    syncs = kube.disruption.syncs
    await core.patch_namespaced_pod("p", NS, {"metadata": {"labels": busy}})
    await wait_for(status_when(kube, "busy", lambda s: s["currentHealthy"] == 1))
    # The pod's event, then its own write's: that sync finds the status up to date.
    await wait_for(lambda: kube.disruption.syncs >= syncs + 2)
    assert status_updates(kube) == 1

    syncs = kube.disruption.syncs
    await core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"tier": "front"}}})
    await settled(kube, syncs)
    assert status_updates(kube) == 1

    await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    await wait_for(status_when(kube, "busy", lambda s: s["expectedPods"] == 0))
    assert status_updates(kube) == 2
    assert kube.requests.count(user=DISRUPTION_USER) == 2


async def test_the_fail_safe_status_is_written_on_every_sync(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """failSafe updates the status without comparing it: a sync that fails again sends an
    update that changes nothing (the API server answers 200 and writes nothing)."""
    core, policy = apis
    kube.controllers.requests = kube.requests
    owner = {"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner", "uid": "u1"}
    await ready_pods(kube, core, "r", owner={**owner, "name": "r"})
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", maxUnavailable=0))
    await wait_for(status_when(kube, "b", lambda s: condition(s)["reason"] == "SyncFailed"))
    # The fail-safe write, then one more on its own write's event, which changes nothing.
    await wait_for(lambda: status_updates(kube) == 2)
    syncs = kube.disruption.syncs
    version = (kube.store.get(PDBS, NS, "b") or {})["metadata"]["resourceVersion"]

    await core.patch_namespaced_pod("r", NS, {"metadata": {"labels": {"tier": "front"}}})
    await settled(kube, syncs)

    assert status_updates(kube) == 3
    assert (kube.store.get(PDBS, NS, "b") or {})["metadata"]["resourceVersion"] == version


# --- eviction ------------------------------------------------------------------------------


async def test_eviction_without_a_budget_marks_and_deletes_the_pod(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, _ = apis
    await ready_pods(kube, core, "a")
    response = await evict(core, "a", grace_period_seconds=7)
    assert response.status == 201
    assert json.loads(await response.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    obj = kube.store.get(PODS, NS, "a")
    if obj is not None:
        assert obj["metadata"]["deletionGracePeriodSeconds"] == 7
        target = next(c for c in obj["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (target["status"], target["reason"], target["message"]) == (
            "True",
            "EvictionByEvictionAPI",
            "Eviction API: evicting",
        )
    await wait_for(lambda: kube.store.get(PODS, NS, "a") is None)
    assert (await refused(core, "a"))[0] == 404


async def test_eviction_uses_the_budget_then_refuses(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "a", "b", "c")
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=2))
    await wait_for(status_when(kube, "b", lambda s: s["disruptionsAllowed"] == 1))
    sub = kube.store.subscribe({PDBS})
    try:
        assert (await evict(core, "a")).status == 201
        written = await sub.queue.get()
    finally:
        kube.store.unsubscribe(sub)
    assert isinstance(written, Event)
    after = written.obj["status"]
    assert after["disruptionsAllowed"] == 0
    assert "a" in after["disruptedPods"]
    assert condition(after)["reason"] == "InsufficientPods"
    code, body, headers = await refused(core, "b")
    assert (code, body["reason"], body["message"]) == (429, "TooManyRequests", VIOLATION)
    assert body["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget b needs 2 healthy pods and has 2 currently",
            }
        ]
    }
    assert "Retry-After" not in headers
    assert ready(kube, "b") is not None
    await wait_for(lambda: kube.store.get(PODS, NS, "a") is None)
    status = await wait_for(status_when(kube, "b", lambda s: "disruptedPods" not in s))
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (2, 0)


async def test_a_huge_min_available_refuses_every_eviction_of_its_pods(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "busy", labels={"app": "web", "busy": "true"})
    await ready_pods(kube, core, "idle")
    selector = {"matchLabels": {"busy": "true"}}
    await policy.create_namespaced_pod_disruption_budget(
        NS, budget("hold", minAvailable=HUGE, selector=selector)
    )
    await wait_for(status_when(kube, "hold", lambda s: s["currentHealthy"] == 1))
    code, body, _ = await refused(core, "busy")
    assert code == 429
    assert body["details"]["causes"][0]["message"] == (
        f"The disruption budget hold needs {HUGE} healthy pods and has 1 currently"
    )
    assert (await evict(core, "idle")).status == 201


async def test_two_budgets_over_one_pod_are_a_500(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "a")
    for name in ("one", "two"):
        await policy.create_namespaced_pod_disruption_budget(NS, budget(name, minAvailable=0))
    code, body, _ = await refused(core, "a")
    assert code == 500
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction "
        "subresource does not support.",
        "code": 500,
    }


async def test_a_pending_pod_ignores_its_budget(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await core.patch_node("sandbox-node", {"spec": {"unschedulable": True}})
    await core.create_namespaced_pod(NS, pod("waiting"))
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=HUGE))
    await wait_for(status_when(kube, "b", lambda s: s["expectedPods"] == 1))
    assert (await evict(core, "waiting")).status == 201
    assert kube.store.get(PODS, NS, "waiting") is None


@pytest.mark.parametrize(("policy_name", "allowed"), [("AlwaysAllow", True), (None, False)])
async def test_an_unready_pod_goes_by_the_unhealthy_pod_eviction_policy(
    kube: KubeEmulator,
    apis: tuple[client.CoreV1Api, client.PolicyV1Api],
    policy_name: str | None,
    allowed: bool,
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "sick")
    rt = kube.catalog.preferred(*PODS)
    assert rt is not None
    cur = kube.store.get(PODS, NS, "sick")
    assert cur is not None
    unready = json.loads(json.dumps(cur))
    for c in unready["status"]["conditions"]:
        if c["type"] == "Ready":
            c["status"] = "False"
    kube.registry.commit(rt, cur=cur, new=unready, subresource="status")
    spec: Obj = {"minAvailable": 1}
    if policy_name:
        spec["unhealthyPodEvictionPolicy"] = policy_name
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", **spec))
    await wait_for(status_when(kube, "b", lambda s: s["expectedPods"] == 1))
    if allowed:
        assert (await evict(core, "sick")).status == 201
    else:
        assert (await refused(core, "sick"))[0] == 429


async def test_a_dry_run_eviction_changes_nothing(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, policy = apis
    await ready_pods(kube, core, "a", "b")
    await policy.create_namespaced_pod_disruption_budget(NS, budget("b", minAvailable=1))
    before = await wait_for(status_when(kube, "b", lambda s: s["disruptionsAllowed"] == 1))
    assert (await evict(core, "a", dry_run=["All"])).status == 201
    assert (kube.store.get(PDBS, NS, "b") or {})["status"] == before
    assert "deletionTimestamp" not in (kube.store.get(PODS, NS, "a") or {})["metadata"]


async def test_eviction_needs_create_on_pods_eviction_only(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    core, _ = apis
    await ready_pods(kube, core, "a")
    rbac = "rbac.authorization.k8s.io/v1"
    kube.apply(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "evictor", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "evictor", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "evictor"},
            "subjects": [{"kind": "User", "name": "ev", "apiGroup": "rbac.authorization.k8s.io"}],
        }
    )
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}
    url = f"{kube.url}/api/v1/namespaces/{NS}/pods/a/eviction"
    async with aiohttp.ClientSession() as http:
        for user, code in (("nobody", 403), ("ev", 201)):
            headers = {"Authorization": f"Bearer {kube.user_token(user)}"}
            async with http.post(url, json=body, headers=headers) as resp:
                assert resp.status == code, await resp.text()
        headers = {"Authorization": f"Bearer {kube.user_token('ev')}"}
        async with http.delete(f"{kube.url}/api/v1/namespaces/{NS}/pods/a", headers=headers) as r:
            assert r.status == 403
        mismatch = {**body, "metadata": {"name": "other"}}
        async with http.post(url, json=mismatch, headers=headers) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == (
                "name in URL does not match name in Eviction object"
            )


async def test_discovery_lists_pods_eviction_as_policy_v1(kube: KubeEmulator) -> None:
    headers = {"Authorization": f"Bearer {kube.admin_token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{kube.url}/api/v1", headers=headers) as r,
    ):
        resources = {e["name"]: e for e in (await r.json())["resources"]}
    entry = resources["pods/eviction"]
    assert (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == (
        "policy",
        "v1",
        "Eviction",
        ["create"],
    )


async def test_eviction_in_a_terminating_namespace_is_403(
    kube: KubeEmulator, apis: tuple[client.CoreV1Api, client.PolicyV1Api]
) -> None:
    """The NamespaceLifecycle admission refuses the Eviction's create; kubectl drain retries on
    exactly this cause."""
    core, _ = apis
    await ready_pods(kube, core, "a")
    held = {"name": "held", "finalizers": ["example.com/hold"]}
    await core.create_namespaced_config_map(NS, {"metadata": held})
    await core.delete_namespace(NS)
    code, body, _ = await refused(core, "a")
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        f'pods "a" is forbidden: unable to create new content in namespace {NS} because it is '
        "being terminated"
    )
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"


def test_an_eviction_keeps_its_pod_out_of_current_healthy_for_two_minutes() -> None:
    """The controller's DeletionTimeout, on the pure status computation: an entry of
    disruptedPods younger than two minutes keeps its pod from counting and asks for a recheck
    when it expires; an older one is dropped and the pod counts again."""
    now = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    pods = [
        {
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        for name in ("a", "b", "c")
    ]
    pdb = {
        "metadata": {"name": "b", "namespace": NS, "generation": 1},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {
            "disruptedPods": {"a": "2026-12-06T11:59:00Z", "b": "2026-12-06T11:57:00Z"},
            "observedGeneration": 1,
        },
    }
    budget = budget_status(pdb, pods, scale_of=lambda ref, ns: None, now=now)
    assert budget.status["disruptedPods"] == {"a": "2026-12-06T11:59:00Z"}
    assert (budget.status["currentHealthy"], budget.status["disruptionsAllowed"]) == (2, 1)
    assert budget.recheck == dt.datetime(2026, 12, 6, 12, 1, tzinfo=dt.UTC)


STORED: Obj = {
    "observedGeneration": 1,
    "disruptionsAllowed": 0,
    "currentHealthy": 1,
    "desiredHealthy": HUGE,
    "expectedPods": 1,
    "conditions": [
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "InsufficientPods",
            "message": "",
            "observedGeneration": 1,
            "lastTransitionTime": "2026-12-06T00:00:00Z",
        }
    ],
}


@pytest.mark.parametrize(
    ("change", "fresh"),
    [
        ({}, True),
        ({"disruptedPods": {}}, True),  # no map and an empty one alike
        ({"conditions": [{**STORED["conditions"][0], "message": "set by hand"}]}, True),
        ({"currentHealthy": 2}, False),
        ({"disruptedPods": {"p": "2026-12-06T00:00:00Z"}}, False),
        ({"observedGeneration": 0}, False),
        ({"conditions": [{**STORED["conditions"][0], "reason": "SyncFailed"}]}, False),
        ({"conditions": []}, False),
    ],
)
def test_a_status_is_written_unless_up_to_date_as_update_pdb_status_judges(
    change: Obj, fresh: bool
) -> None:
    """updatePdbStatus compares the counts, disruptedPods, the observed generation, and the
    condition's status and reason (not its message or times)."""
    pdb = {"metadata": {"generation": 1}, "status": {**STORED, **change}}
    status = {k: v for k, v in STORED.items() if k != "conditions"}
    assert up_to_date(pdb, status) is fresh
