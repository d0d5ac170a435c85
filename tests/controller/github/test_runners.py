"""The runner reconcilers' Actions calls (`controller/github/runners.py`): a runner is removed
from the service once for both reconcilers, credentials the service refused are read again, a
name left registered is freed only in the runner's own scale set. No reconciler runs here: the
tests call the facade on a runner object and count the requests at the Actions emulator."""

from __future__ import annotations

import pytest

from controller.github.runners import NameClash, Removal, Runners
from controller.runtime import Expectations, Recall
from shared.kube.views import uid_of
from tests.controller.conftest import Rig, RigOptions

ALONE = RigOptions(controllers=(), kubelet=False)


@pytest.fixture
def rig_options() -> RigOptions:
    return ALONE


def secret_reads(rig: Rig) -> int:
    return rig.controller_requests().get("get secrets", 0)


async def registered_runner(rig: Rig, runners: Runners) -> tuple[dict[str, object], int, Recall]:
    """A registered runner, its id, and what a process remembers of it (its `Recall`)."""
    runner = await rig.create_runner(name="one")
    config = await runners.jit_config(runner, rig.scale_set_id, work_folder="")
    assert config.runner.id in rig.gh.state.runners
    return runner, config.runner.id, Recall(Expectations(), uid_of(runner))


async def test_a_runner_rejected_then_removed_is_removed_once(rig: Rig) -> None:
    runners = Runners(rig.deps.clients)
    runner, rid, memory = await registered_runner(rig, runners)
    # The admin token is refused and cannot be renewed: GitHub refuses the credentials.
    rig.gh.faults.inject("remove_runner", status=401, count=1)
    rig.gh.faults.inject("registration_token", status=401, count=1)

    assert await runners.remove(runner, rid, memory) is Removal.NO_CREDENTIALS
    assert not runners.unregistered(memory)
    assert rid in rig.gh.state.runners

    # The pool forgot the refused credentials: the next removal reads the Secret again.
    reads = secret_reads(rig)
    assert await runners.remove(runner, rid, memory) is Removal.REMOVED
    assert secret_reads(rig) == reads + 1
    assert runners.unregistered(memory)
    assert rid not in rig.gh.state.runners
    removals = rig.gh.state.count("remove_runner")

    # Either reconciler's next pass: no second request.
    assert await runners.remove(runner, rid, memory) is Removal.REMOVED
    assert await runners.unregister(runner, rid, memory)
    assert rig.gh.state.count("remove_runner") == removals


async def test_a_busy_runner_is_asked_again(rig: Rig) -> None:
    runners = Runners(rig.deps.clients)
    runner, rid, memory = await registered_runner(rig, runners)
    rig.gh.state.runners[rid].job_id = 4242

    assert await runners.remove(runner, rid, memory) is Removal.BUSY
    assert not await runners.unregister(runner, rid, memory)
    assert rig.gh.state.count("remove_runner") == 2
    assert not runners.unregistered(memory)


async def test_a_name_is_freed_only_in_the_runners_scale_set(rig: Rig) -> None:
    runners = Runners(rig.deps.clients)
    runner, rid, memory = await registered_runner(rig, runners)

    assert await runners.free_name(runner, rig.scale_set_id + 1) is NameClash.TAKEN
    assert rid in rig.gh.state.runners
    assert await runners.free_name(runner, rig.scale_set_id) is NameClash.FREED
    assert rid not in rig.gh.state.runners
    # Freeing a name is no removal of the runner, which registers again next.
    assert not runners.unregistered(memory)
    assert await runners.free_name(runner, rig.scale_set_id) is NameClash.FREED
