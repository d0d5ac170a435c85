"""The AutoscalingRunnerSet reconciler's Actions calls (`controller/github/scalesets.py`),
called on a set object without the reconciler; results are read at the Actions emulator."""

from __future__ import annotations

import pytest

from controller.github.scalesets import ScaleSets
from shared.actions.errors import ScaleSetNotFound
from shared.typedefs import JSONDict
from tests.controller.conftest import Rig, RigOptions


@pytest.fixture
def rig_options() -> RigOptions:
    return RigOptions(controllers=(), kubelet=False)


def scale_set_object(rig: Rig, **spec: str) -> JSONDict:
    return {
        "metadata": {"namespace": rig.namespace, "name": "facade"},
        "spec": {
            "githubConfigUrl": rig.config_url,
            "githubConfigSecret": "github-secret",
            "runnerScaleSetName": "facade",
            **spec,
        },
    }


async def test_register_move_rename_delete(rig: Rig) -> None:
    scale_sets = ScaleSets(rig.deps.clients)
    ars = scale_set_object(rig)
    made = await scale_sets.find_or_register(ars)
    assert (made.name, made.runner_group_name) == ("facade", "Default")
    assert (await scale_sets.find_or_register(ars)).id == made.id
    assert rig.gh.state.count("create_scale_set") == 1

    group = rig.gh.add_runner_group("gpu")
    moved = await scale_sets.move_to_group(ars, made.id, "gpu")
    assert moved.runner_group_name == "gpu"
    assert rig.gh.state.scale_sets[made.id].runner_group_id == group
    renamed = await scale_sets.rename(ars, made.id, "renamed")
    assert (renamed.id, renamed.name) == (made.id, "renamed")

    await scale_sets.check(ars, made.id)
    await scale_sets.delete(ars, made.id)
    assert made.id not in rig.gh.state.scale_sets
    with pytest.raises(ScaleSetNotFound):
        await scale_sets.check(ars, made.id)
    # One already gone counts as deleted.
    await scale_sets.delete(ars, made.id)
