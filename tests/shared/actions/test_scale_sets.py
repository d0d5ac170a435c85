"""Runner scale sets (CRUD, by name and id), runner groups and acquirable jobs."""

from __future__ import annotations

import json

import pytest

from sandbox.actions import ActionsEmulator
from shared.actions import (
    ActionsClient,
    ActionsError,
    AmbiguousName,
    InvalidArgument,
    Label,
    RunnerGroupNotFound,
    RunnerScaleSet,
    RunnerSetting,
    ScaleSetNotFound,
)

from .conftest import endpoints


async def test_create_sends_go_body_and_decodes(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    made = await client.create_runner_scale_set(
        RunnerScaleSet(
            name="arc",
            runner_group_id=1,
            labels=[Label(name="arc"), Label(name="gpu", type="")],
            runner_setting=RunnerSetting(disable_update=True),
        )
    )
    assert made.id > 0
    assert (made.name, made.runner_group_id, made.runner_group_name) == ("arc", 1, "Default")
    assert [(lb.type, lb.name) for lb in made.labels] == [("System", "arc"), ("System", "gpu")]
    assert made.runner_setting.disable_update
    assert made.statistics is not None
    record = actions.state.requests[-1]
    assert (record.method, record.path) == ("POST", "/tenant/123/_apis/runtime/runnerscalesets")
    assert record.query == {"api-version": "6.0-preview"}


async def test_create_defaults_labels_to_name(client: ActionsClient) -> None:
    requested = RunnerScaleSet(name="plain", runner_group_id=1)
    made = await client.create_runner_scale_set(requested)
    assert [(lb.type, lb.name) for lb in made.labels] == [("System", "plain")]
    assert requested.labels == []


async def test_create_without_name_or_labels_sends_nothing(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    with pytest.raises(InvalidArgument, match="name or at least one label"):
        await client.create_runner_scale_set(RunnerScaleSet(runner_group_id=1))
    assert "create_scale_set" not in endpoints(actions)


async def test_create_text_error_carries_status_and_body(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    actions.faults.inject(
        "create_scale_set", status=400, body="bad scale set", content_type="text/plain"
    )
    with pytest.raises(ActionsError, match=r"status=400.*: bad scale set") as caught:
        await client.create_runner_scale_set(RunnerScaleSet(name="x", runner_group_id=1))
    assert caught.value.activity_id


async def test_get_by_name(client: ActionsClient, scale_set: RunnerScaleSet) -> None:
    found = await client.get_runner_scale_set(runner_group_id=1, name="arc")
    assert found is not None
    assert found.id == scale_set.id


async def test_get_by_name_query(actions: ActionsEmulator, client: ActionsClient) -> None:
    await client.get_runner_scale_set(runner_group_id=1, name="banana")
    record = actions.state.requests[-1]
    assert record.query == {"api-version": "6.0-preview", "name": "banana", "runnerGroupId": "1"}


async def test_get_by_name_missing_is_none(client: ActionsClient) -> None:
    assert await client.get_runner_scale_set(runner_group_id=1, name="nope") is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"count": 0, "value": [{"id": 1, "name": "ghost"}]}, None),
        ({"count": 1, "value": [{"id": 4, "name": "arc"}]}, 4),
    ],
)
async def test_get_by_name_trusts_count(
    actions: ActionsEmulator, client: ActionsClient, body: object, expected: int | None
) -> None:
    actions.faults.inject("get_scale_set_by_name", status=200, body=json.dumps(body))
    found = await client.get_runner_scale_set(runner_group_id=1, name="arc")
    assert (found.id if found else None) == expected


async def test_get_by_name_several_is_ambiguous(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    body = {"count": 2, "value": [{"id": 1, "name": "arc"}, {"id": 2, "name": "arc"}]}
    actions.faults.inject("get_scale_set_by_name", status=200, body=json.dumps(body))
    with pytest.raises(AmbiguousName, match=r"multiple runner scale sets found.*activity_id"):
        await client.get_runner_scale_set(runner_group_id=1, name="arc")


async def test_get_by_id(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    found = await client.get_runner_scale_set_by_id(scale_set.id)
    assert found.name == "arc"
    assert actions.state.requests[-1].path == (
        f"/tenant/123/_apis/runtime/runnerscalesets/{scale_set.id}"
    )


async def test_get_by_id_missing(client: ActionsClient) -> None:
    with pytest.raises(ScaleSetNotFound, match="RunnerScaleSetNotFoundException"):
        await client.get_runner_scale_set_by_id(999)


async def test_get_by_id_null_body_is_not_found(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    actions.faults.inject("get_scale_set", status=200, body="null")
    with pytest.raises(ScaleSetNotFound):
        await client.get_runner_scale_set_by_id(1)


async def test_update_renames(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    updated = await client.update_runner_scale_set(scale_set.id, RunnerScaleSet(name="renamed"))
    assert (updated.id, updated.name) == (scale_set.id, "renamed")
    record = actions.state.requests[-1]
    assert (record.method, record.query["api-version"]) == ("PATCH", "6.0-preview")


async def test_update_moves_to_another_group(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    group = actions.add_runner_group("gpu-group")
    updated = await client.update_runner_scale_set(
        scale_set.id, RunnerScaleSet(runner_group_id=group)
    )
    assert (updated.runner_group_id, updated.runner_group_name) == (group, "gpu-group")


async def test_update_missing(client: ActionsClient) -> None:
    with pytest.raises(ScaleSetNotFound):
        await client.update_runner_scale_set(999, RunnerScaleSet(name="x"))


async def test_delete(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    await client.delete_runner_scale_set(scale_set.id)
    assert actions.state.requests[-1].status == 204
    with pytest.raises(ScaleSetNotFound):
        await client.get_runner_scale_set_by_id(scale_set.id)


async def test_delete_error_message_surfaces(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    actions.faults.inject("delete_scale_set", status=400, body='{"message":"test error"}')
    with pytest.raises(ActionsError, match="test error"):
        await client.delete_runner_scale_set(10)


async def test_runner_group_by_name(actions: ActionsEmulator, client: ActionsClient) -> None:
    group_id = actions.add_runner_group("linux")
    group = await client.get_runner_group_by_name("linux")
    assert (group.id, group.name, group.is_default_group) == (group_id, "linux", False)
    record = actions.state.requests[-1]
    assert record.path == "/tenant/123/_apis/runtime/runnergroups/"
    assert record.query == {"api-version": "6.0-preview", "groupName": "linux"}


async def test_runner_group_missing(client: ActionsClient) -> None:
    with pytest.raises(RunnerGroupNotFound, match="no runner group found with name 'nope'"):
        await client.get_runner_group_by_name("nope")


async def test_runner_group_several_is_ambiguous(
    actions: ActionsEmulator, client: ActionsClient
) -> None:
    body = {"count": 2, "value": [{"id": 2, "name": "g"}, {"id": 3, "name": "g"}]}
    actions.faults.inject("get_runner_group", status=200, body=json.dumps(body))
    with pytest.raises(AmbiguousName):
        await client.get_runner_group_by_name("g")


async def test_acquirable_jobs_none_is_204(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    assert await client.get_acquirable_jobs(scale_set.id) == []
    assert actions.state.requests[-1].status == 204


async def test_acquirable_jobs_lists_available(
    actions: ActionsEmulator, client: ActionsClient, scale_set: RunnerScaleSet
) -> None:
    request_id = actions.enqueue_job(labels=["arc"], repository="octo/app")
    jobs = await client.get_acquirable_jobs(scale_set.id)
    assert [(j.runner_request_id, j.repository_name, j.owner_name) for j in jobs] == [
        (request_id, "app", "octo")
    ]
    assert jobs[0].request_labels == ["arc"]
