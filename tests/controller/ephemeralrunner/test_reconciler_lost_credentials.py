"""Deleting runners whose GitHub config Secret is gone (docs/reconcilers.md#deleting-a-runner):
after `missing_credentials_removal_timeout_seconds` the registration finalizer goes, with a
`RegistrationLeftBehind` Warning Event and a count in
`gha_controller_runner_registrations_left_behind_total`.

Before this, the runners' finalizers (and so the set's, and a namespace being deleted) waited
for ever for a Secret that would not come back.
"""

from __future__ import annotations

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.errors import NotFound
from shared.kube.objects import EVENT, SECRET, Kind
from tests.controller.conftest import FAST, Rig, RigOptions, metric

NAMESPACE = Kind("Namespace", "namespaces", namespaced=False)
LEFT_BEHIND = "gha_controller_runner_registrations_left_behind_total"

# The client pool re-reads the config Secret on every call, so the deleted Secret is noticed at
# once instead of after the default five minutes of trusting the last read.
SHORT_WAIT = RigOptions(
    kubelet=False,
    settings=FAST.model_copy(
        update={"missing_credentials_removal_timeout_seconds": 0.3, "credentials_ttl_seconds": 0.01}
    ),
)


@pytest.fixture
def rig_options() -> RigOptions:
    return SHORT_WAIT


async def two_registered_runners(rig: Rig) -> set[int]:
    await rig.create_runner_set(replicas=2, patch_id=1)
    return {r["status"]["runnerId"] for r in await rig.registered(2)}


def left_behind(rig: Rig) -> float:
    return metric(
        rig.metrics(),
        LEFT_BEHIND,
        name="arc",
        namespace=rig.namespace,
        organization="owner",
        repository="repo",
        enterprise="",
    )


async def test_set_deleted_after_its_secret_goes_away_with_a_report(rig: Rig) -> None:
    runner_ids = await two_registered_runners(rig)
    await rig.objects.delete(SECRET, rig.namespace, "github-secret")
    await rig.objects.delete(EPHEMERAL_RUNNER_SET, rig.namespace, "arc")

    async def all_gone() -> bool:
        try:
            await rig.runner_set()
        except NotFound:
            return not await rig.runners()
        return False

    await rig.until(all_gone, what="the set and its runners deleted")
    events = (await rig.objects.list(EVENT, rig.namespace))["items"]
    left = [e for e in events if e["reason"] == "RegistrationLeftBehind"]
    assert len(left) == 2
    assert all(e["type"] == "Warning" and "github-secret" in e["message"] for e in left)
    assert left_behind(rig) == 2
    # What the Event reports: the service still lists both runners.
    assert runner_ids <= set(rig.gh.state.runners)


async def test_namespace_deleted_after_its_secret_goes_away(rig: Rig) -> None:
    await two_registered_runners(rig)
    await rig.objects.delete(SECRET, rig.namespace, "github-secret")
    await rig.objects.delete(NAMESPACE, None, rig.namespace)

    async def namespace_gone() -> bool:
        try:
            await rig.objects.get(NAMESPACE, None, rig.namespace)
        except NotFound:
            return True
        return False

    await rig.until(namespace_gone, what="the namespace deleted")
    assert left_behind(rig) == 2
