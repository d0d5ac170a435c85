"""Deleting a runner namespace under the manifests' RBAC
(docs/install.md#deleting-a-runner-namespace): the namespace goes, whatever its runners are
doing, for a docker-run set and for an AutoscalingRunnerSet, with the default install and with
manifests/without-cluster-role/.

The controller runs as its ServiceAccount with exactly the RBAC of manifests/ (the rig's
default), and the test's listener writes go out as the listener's ServiceAccount with its Role.
The controller's only writes in a runner namespace come from the RoleBinding `gha-controller`
there, which the emulator's namespace controller deletes first, as a real one may. Before the
controller protected that binding (and bound a ClusterRole rather than a Role of the namespace),
the runners' finalizers were refused with 403 for ever and the namespace stayed Terminating.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from controller.runnernamespace import PROTECTION_FINALIZER
from shared.api.kinds import EPHEMERAL_RUNNER, EPHEMERAL_RUNNER_SET
from shared.kube.objects import ROLE_BINDING, Kind
from tests.controller.autoscaling import ALL, converged, create_ars
from tests.controller.conftest import CONTROLLER_USER, Rig, RigOptions

NAMESPACE = Kind("Namespace", "namespaces", namespaced=False)
ROLE_NAME = "gha-controller"
DOCKER_RUN = RigOptions(simulated_runners=True)
OPTIONS = {
    "docker-run": DOCKER_RUN,
    "docker-run-without-cluster-role": DOCKER_RUN.__class__(
        simulated_runners=True, cluster_role=False
    ),
    "in-cluster": ALL,
    "in-cluster-without-cluster-role": ALL.__class__(
        controllers=ALL.controllers, simulated_runners=True, cluster_role=False
    ),
}


async def namespace_gone(rig: Rig) -> bool:
    return not await rig.exists(NAMESPACE, None, rig.namespace)


async def protected(rig: Rig) -> bool:
    binding = await rig.objects.get(ROLE_BINDING, rig.namespace, ROLE_NAME)
    return PROTECTION_FINALIZER in (binding["metadata"].get("finalizers") or [])


async def runners_for(rig: Rig, *, in_cluster: bool, busy: int, idle: int) -> set[int]:
    """`busy + idle` registered runners, `busy` of them running a job; their runner ids."""
    replicas = busy + idle
    # The test plays the listener, with the listener's identity and RBAC (its Role goes with
    # the namespace too); jobs go to runners without being acquired first.
    rig.gh.state.require_acquire = False
    if in_cluster:
        await create_ars(rig)
        await converged(rig)
        [runner_set] = (await rig.objects.list(EPHEMERAL_RUNNER_SET, rig.namespace))["items"]
        name = runner_set["metadata"]["name"]
    else:
        name = (await rig.create_runner_set(replicas=0, patch_id=0))["metadata"]["name"]
    listener = await rig.as_listener(name)
    await listener.patch(
        EPHEMERAL_RUNNER_SET, rig.namespace, name, {"spec": {"replicas": replicas, "patchID": 1}}
    )
    ids: set[int] = set()
    if replicas:
        found = await rig.registered(replicas)
        ids = {r["status"]["runnerId"] for r in found}
        await rig.until(lambda: all_online(rig, ids), what="simulated runners online")
        jobs = {rig.gh.enqueue_job(labels=["arc"], duration=300) for _ in range(busy)}
        by_id = {r["status"]["runnerId"]: r for r in found}
        assigned = (
            await rig.until(lambda: assigned_to(rig, jobs), what="jobs assigned") if busy else {}
        )
        for runner_id, job in assigned.items():
            runner = by_id[runner_id]["metadata"]["name"]
            await listener.get(EPHEMERAL_RUNNER, rig.namespace, runner)
            await listener.patch(
                EPHEMERAL_RUNNER,
                rig.namespace,
                runner,
                {"status": {"phase": "Running", "jobId": str(job), "jobRequestId": job}},
                status=True,
            )
    await rig.until(lambda: protected(rig), what="the controller's RoleBinding protected")
    return ids


async def all_online(rig: Rig, ids: set[int]) -> bool:
    runners = rig.gh.state.runners
    return all(i in runners and runners[i].online for i in ids)


async def assigned_to(rig: Rig, jobs: set[int]) -> dict[int, int]:
    """Runner id -> job, once every job is assigned."""
    found = {r.id: r.job_id for r in rig.gh.state.runners.values() if r.job_id in jobs}
    return found if len(found) == len(jobs) else {}


@pytest.mark.parametrize("rig_options", list(OPTIONS.values()), ids=list(OPTIONS))
@pytest.mark.parametrize(("busy", "idle"), [(2, 1), (0, 2), (0, 0)], ids=["busy", "idle", "none"])
async def test_namespace_deletion_finishes(
    rig: Rig, rig_options: RigOptions, busy: int, idle: int
) -> None:
    in_cluster = "autoscalingrunnerset" in rig_options.controllers
    ids = await runners_for(rig, in_cluster=in_cluster, busy=busy, idle=idle)
    rig.kube.requests.reset()

    await rig.objects.delete(NAMESPACE, None, rig.namespace)

    try:
        await rig.until(lambda: namespace_gone(rig), what="the namespace deleted")
    except AssertionError:
        ns = await rig.objects.get(NAMESPACE, None, rig.namespace)
        raise AssertionError(f"still there: {ns['status']}") from None
    # A create in a terminating namespace is refused with 403 by design (a reconcile racing the
    # deletion); any other 403 is a permission lost on the way.
    refused = [
        r
        for r in rig.kube.requests.log
        if r.user == CONTROLLER_USER and r.code == 403 and r.verb != "create"
    ]
    assert [(r.verb, r.resource, r.path) for r in refused] == []
    # Idle runners are unregistered; a busy runner's registration goes when its job ends
    # (docs/reconcilers.md#deleting-a-runner).
    left = ids & set(rig.gh.state.runners)
    assert len(left) <= busy


@pytest.mark.parametrize("rig_options", [DOCKER_RUN], ids=["docker-run"])
async def test_a_namespace_without_the_component_is_named_in_the_log(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A runner set in a namespace the runner-namespace component was never applied to: the
    controller may write nothing there (no condition, no Event can land), so a warning names
    the missing RoleBinding and what to do, and it looks again later (issue: a set there must
    not fail silently)."""
    rig.kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bare"}})
    body = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "EphemeralRunnerSet",
        "metadata": {"name": "lonely", "namespace": "bare"},
        "spec": {"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": rig.runner_spec()},
    }
    rig.kube.apply(body)

    def warned() -> bool:
        return any(
            r.levelname == "WARNING"
            and "RoleBinding gha-controller in namespace bare" in r.getMessage()
            and "runner-namespace component" in r.getMessage()
            for r in caplog.records
        )

    await rig.until(lambda: asyncio.sleep(0, warned()), what="the warning")


@pytest.mark.parametrize("rig_options", [DOCKER_RUN], ids=["docker-run"])
async def test_a_binding_protected_by_an_earlier_process_is_not_reported_unprotected(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A controller restarted (or a new leader) while the namespace is being deleted finds the
    binding terminating with the protection an earlier process added: that is the design
    working, not a warning. Seen on a real cluster: the warning came first."""
    caplog.set_level(logging.INFO, logger="controller.runnernamespace")
    await rig.objects.patch(
        ROLE_BINDING,
        rig.namespace,
        ROLE_NAME,
        {"metadata": {"finalizers": [PROTECTION_FINALIZER]}},
    )
    await rig.objects.delete(ROLE_BINDING, rig.namespace, ROLE_NAME)
    await rig.create_runner_set(replicas=0)
    await rig.settle()
    assert "without protection" not in caplog.text
    assert await protected(rig)
    # Its runners gone, the binding is released and goes.
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def binding_gone() -> bool:
        return not await rig.exists(ROLE_BINDING, rig.namespace, ROLE_NAME)

    await rig.until(binding_gone, what="the binding released")


@pytest.mark.parametrize("rig_options", [DOCKER_RUN], ids=["docker-run"])
async def test_runner_churn_in_a_protected_namespace_costs_no_pass(rig: Rig) -> None:
    """Runners coming and going beside their set cannot change the answer (the set is left):
    they used to wake the namespace's key twice per runner (a pass that found nothing to do,
    1.9 passes per runner on the default workload). The last object going does wake it."""
    await runners_for(rig, in_cluster=False, busy=0, idle=2)
    await rig.settle()
    before = rig.reconciles("runnernamespace")
    listener = await rig.as_listener("arc")
    await listener.patch(
        EPHEMERAL_RUNNER_SET, rig.namespace, "arc", {"spec": {"replicas": 4, "patchID": 2}}
    )
    await rig.registered(4)
    await listener.patch(
        EPHEMERAL_RUNNER_SET, rig.namespace, "arc", {"spec": {"replicas": 1, "patchID": 0}}
    )
    await rig.registered(1)
    await rig.settle()
    assert rig.reconciles("runnernamespace") == before
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def released() -> bool:
        return not await protected(rig)

    await rig.until(released, what="the RoleBinding released")
    assert rig.reconciles("runnernamespace") > before
