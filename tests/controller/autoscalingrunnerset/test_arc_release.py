"""An ARC user keeps their Helm release (docs/install.md#keeping-arcs-helm-release): the objects a
released ARC (0.9.3, 0.12.1, 0.14.2) left are taken over in place by this controller, running as
its ServiceAccount with the RBAC of manifests/.

Two controllers in turn over one cluster, as a user does it: first ARC's (played by this
project's runner reconcilers, which build runners as ARC's do: `<set>-runner-xxxxx`, ARC's
finalizers, the set's annotations copied) makes two runners for ARC's runner set and one of them
takes a job; then it stops (its finalizer on the runner set put back to ARC's own) and this
controller, with all four reconcilers, starts. Before this test, the AutoscalingRunnerSet
reconciler looked for a runner set named like the set: it made a second one at 0 replicas, counted
0 runners while ARC's ran, recycled ARC's idle runners for their foreign digest, and deleted the
scale set on GitHub with ARC's runners still there.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from controller.autoscalingrunnerset.rules import CONDITION_LISTENER
from controller.runners.objects import is_own_digest
from sandbox.actions.emulator import ActionsEmulator
from sandbox.kube.emulator import KubeEmulator
from sandbox.kube.testing import project_crds
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET, EPHEMERAL_RUNNER_SET
from shared.api.names import ANNOTATION_RUNNER_SET_NAME
from shared.kube.errors import NotFound
from shared.kube.objects import EVENT
from shared.typedefs import JSONDict
from tests.controller import arc_released
from tests.controller.autoscaling import ALL, RUNNER_TEMPLATE
from tests.controller.conftest import Rig, RigOptions, install_rbac, open_rig

ARC_RUNNERS = RigOptions(
    controllers=("ephemeralrunner", "ephemeralrunnerset"), simulated_runners=True
)
NAME = "arc-runner-set"


@dataclass
class Takeover:
    rig: Rig
    """This controller's, running."""
    runner_set: str
    """ARC's runner set (generated name)."""
    busy: str
    idle: str
    job: int
    arc_listener: str


def conditions(obj: JSONDict) -> dict[str, JSONDict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def sets_of(rig: Rig) -> list[JSONDict]:
    items: list[JSONDict] = (await rig.objects.list(EPHEMERAL_RUNNER_SET, rig.namespace))["items"]
    return items


@pytest.fixture(params=sorted(arc_released.LINES))
async def takeover(
    request: pytest.FixtureRequest, namespace: str, actions: ActionsEmulator
) -> AsyncIterator[Takeover]:
    line = arc_released.LINES[request.param]
    async with KubeEmulator(container_runtime=actions.runtime, restart_backoff=0.01) as kube:
        kube.apply_crds(project_crds())
        install_rbac(kube, namespace, cluster_role=True)
        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": arc_released.ARC_NAMESPACE}})  # fmt: skip
        token = base64.b64encode(actions.add_pat().encode()).decode()
        kube.apply({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "github-secret", "namespace": namespace},
                    "data": {"github_token": token}})  # fmt: skip
        scale_set = actions.state.create_scale_set(
            name=NAME, runner_group_id=1, labels=[{"name": NAME}], runner_setting={}
        )
        ars = kube.apply(
            arc_released.autoscaling_runner_set(
                line,
                name=NAME,
                namespace=namespace,
                config_url=actions.config_url("owner", "repo"),
                secret="github-secret",
                scale_set_id=scale_set.id,
                template=RUNNER_TEMPLATE,
            )
        )
        runner_set = kube.apply(arc_released.ephemeral_runner_set(ars))["metadata"]["name"]
        arc_listener = kube.apply(
            arc_released.autoscaling_listener(line, ars, {"metadata": {"name": runner_set}})
        )["metadata"]["name"]

        # ARC's controller at work: two runners, one of them busy.
        async with open_rig(
            ARC_RUNNERS, namespace=namespace, actions=actions, kube=kube, scale_set_id=scale_set.id
        ) as arc:
            actions.state.require_acquire = False
            await arc.scale(2, 1, name=runner_set)
            runners = await arc.registered(2)
            ids = [r["status"]["runnerId"] for r in runners]

            async def online() -> bool:
                return all(i in actions.state.runners and actions.state.runners[i].online
                           for i in ids)  # fmt: skip

            await arc.until(online, what="simulated runners online")
            job = actions.enqueue_job(labels=[NAME], duration=600)

            async def assigned() -> JSONDict | None:
                for runner in runners:
                    found = actions.state.runners.get(runner["status"]["runnerId"])
                    if found is not None and found.job_id == job:
                        return runner
                return None

            busy = (await arc.until(assigned, what="job assigned"))["metadata"]["name"]
            await arc.set_status(busy, phase="Running", jobId="job-1", jobRequestId=job)
            [idle] = [r["metadata"]["name"] for r in runners if r["metadata"]["name"] != busy]
        # ARC's own finalizer on its runner set, as ARC's controller left it.
        ers_type = kube.catalog.preferred(EPHEMERAL_RUNNER_SET.group, EPHEMERAL_RUNNER_SET.plural)
        assert ers_type is not None
        kube.registry.patch(
            ers_type,
            ns=namespace,
            name=runner_set,
            content_type="application/merge-patch+json",
            body={"metadata": {"finalizers": [arc_released.FINALIZER_ERS_LEGACY]}},
        )

        async with open_rig(
            ALL, namespace=namespace, actions=actions, kube=kube, scale_set_id=scale_set.id
        ) as rig:
            yield Takeover(rig, runner_set, busy, idle, job, arc_listener)


async def adopted(t: Takeover) -> JSONDict:
    """The set once this controller runs it: its listener drives ARC's runner set and its
    status counts ARC's runners."""

    async def probe() -> JSONDict | None:
        ars = await t.rig.objects.get(AUTOSCALING_RUNNER_SET, t.rig.namespace, NAME)
        listeners = (await t.rig.objects.list(AUTOSCALING_LISTENER, t.rig.system_namespace))[
            "items"
        ]
        status = ars.get("status") or {}
        if (
            status.get("phase") == "Running"
            and status.get("currentRunners") == 2
            and [(listener["spec"] or {}).get("ephemeralRunnerSetName") for listener in listeners]
            == [t.runner_set]
        ):
            return ars
        return None

    found: JSONDict = await t.rig.until(probe, what="the set adopted")
    return found


async def test_arc_runner_set_is_adopted_in_place_with_its_runners(takeover: Takeover) -> None:
    t, rig = takeover, takeover.rig
    ars = await adopted(t)
    # One runner set, ARC's, recorded on the set; no second one made by name.
    assert [s["metadata"]["name"] for s in await sets_of(rig)] == [t.runner_set]
    assert ars["metadata"]["annotations"][ANNOTATION_RUNNER_SET_NAME] == t.runner_set
    [runner_set] = await sets_of(rig)
    # ARC's digest replaced by this controller's without advancing the revision: ARC's idle
    # runner is not recycled, the busy one is untouched.
    assert is_own_digest(runner_set["metadata"]["annotations"][arc_released.RUNNER_SPEC_HASH])
    assert not runner_set["spec"].get("actionableRevision")
    await rig.settle()
    names = {r["metadata"]["name"]: r for r in await rig.live_runners()}
    assert set(names) == {t.busy, t.idle}
    assert names[t.busy]["status"]["phase"] == "Running"
    # ARC's listener still names the set: the user is told, where they look.
    found = conditions(await rig.objects.get(AUTOSCALING_RUNNER_SET, rig.namespace, NAME))
    assert found[CONDITION_LISTENER]["status"] == "False"
    assert f"arc-systems/{t.arc_listener}" in found[CONDITION_LISTENER]["message"]
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    assert any(e["reason"] == "ForeignListener" for e in events)


async def test_helm_upgrade_then_uninstall_leaves_nothing_and_deletes_the_scale_set_last(
    takeover: Takeover,
) -> None:
    t, rig = takeover, takeover.rig
    await adopted(t)
    # ARC's listener removed (`migrate-from-arc --keep-helm-release`): the condition clears.
    await rig.objects.patch(AUTOSCALING_LISTENER, arc_released.ARC_NAMESPACE, t.arc_listener,
                            {"metadata": {"finalizers": None}})  # fmt: skip
    await rig.objects.delete(AUTOSCALING_LISTENER, arc_released.ARC_NAMESPACE, t.arc_listener)

    async def single() -> bool:
        ars = await rig.objects.get(AUTOSCALING_RUNNER_SET, rig.namespace, NAME)
        return conditions(ars).get(CONDITION_LISTENER, {}).get("status") == "True"

    await rig.until(single, what="SingleListener=True")
    # `helm upgrade` with a new runner image: the idle runner is replaced, the busy one stays.
    template = {"spec": {**RUNNER_TEMPLATE["spec"],
                         "containers": [{"name": "runner", "image": "runner:v2"}]}}  # fmt: skip
    await rig.objects.patch(AUTOSCALING_RUNNER_SET, rig.namespace, NAME,
                            {"spec": {"template": template}})  # fmt: skip

    async def idle_replaced() -> bool:
        names = {r["metadata"]["name"] for r in await rig.live_runners()}
        return t.idle not in names and t.busy in names

    await rig.until(idle_replaced, what="the idle runner replaced")
    assert [s["metadata"]["name"] for s in await sets_of(rig)] == [t.runner_set]

    # `helm uninstall`: the set goes; the busy runner finishes its job first; the scale set
    # on GitHub goes only after no runner of it is left; nothing stays Terminating.
    await rig.objects.delete(AUTOSCALING_RUNNER_SET, rig.namespace, NAME)

    async def only_busy_left() -> bool:
        return [r["metadata"]["name"] for r in await rig.runners()] == [t.busy]

    await rig.until(only_busy_left, what="only the busy runner left")
    assert rig.scale_set_id in rig.gh.state.scale_sets
    busy = await rig.runner(t.busy)
    assert busy is not None
    rig.job_finished(busy)
    await rig.set_status(t.busy, phase="Succeeded")

    async def all_gone() -> bool:
        try:
            await rig.objects.get(AUTOSCALING_RUNNER_SET, rig.namespace, NAME)
        except NotFound:
            return not await sets_of(rig) and not await rig.runners()
        return False

    await rig.until(all_gone, within=30, what="everything gone")
    assert rig.scale_set_id not in rig.gh.state.scale_sets
