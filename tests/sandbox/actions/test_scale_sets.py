"""Scale sets (get by name or id, create, update, delete) and runner groups
(docs/sandbox-actions.md#service-behaviour)."""

from __future__ import annotations

import pytest

from sandbox.actions import ActionsEmulator
from tests.sandbox.actions.wire import SCALE_SETS, Service

STATISTICS_KEYS = {
    "totalAvailableJobs",
    "totalAcquiredJobs",
    "totalAssignedJobs",
    "totalRunningJobs",
    "totalRegisteredRunners",
    "totalBusyRunners",
    "totalIdleRunners",
}


async def test_create_answers_200_with_the_scale_set(service: Service) -> None:
    reply = await service.call(
        "POST",
        SCALE_SETS,
        body={
            "name": "arc",
            "runnerGroupId": 1,
            "labels": [{"type": "System", "name": "arc"}, {"name": "gpu"}],
            "RunnerSetting": {"disableUpdate": True},
            "createdOn": "0001-01-01T00:00:00Z",
        },
    )

    assert reply.status == 200
    created = reply.json
    assert created["id"] > 0
    assert created["name"] == "arc"
    assert (created["runnerGroupId"], created["runnerGroupName"]) == (1, "Default")
    assert created["labels"] == [
        {"type": "System", "name": "arc"},
        {"type": "System", "name": "gpu"},
    ]
    assert created["RunnerSetting"] == {"disableUpdate": True}
    assert created["createdOn"] != "0001-01-01T00:00:00Z"
    assert created["runnerJitConfigUrl"].endswith(
        f"/runnerscalesets/{created['id']}/generatejitconfig"
    )
    assert set(created["statistics"]) == STATISTICS_KEYS


async def test_create_without_labels_defaults_to_the_name(service: Service) -> None:
    reply = await service.call("POST", SCALE_SETS, body={"name": "bare"})

    assert reply.json["labels"] == [{"type": "System", "name": "bare"}]
    assert reply.json["runnerGroupId"] == 1


@pytest.mark.parametrize(
    ("body", "status", "type_name"),
    [
        ({"name": ""}, 400, "ArgumentException"),
        ({"name": "arc"}, 409, "RunnerScaleSetExistsException"),
        ({"name": "ARC"}, 409, "RunnerScaleSetExistsException"),
        ({"name": "other", "runnerGroupId": 42}, 404, "RunnerGroupNotFoundException"),
        ({"name": 5}, 400, "ArgumentException"),
        ([], 400, "ArgumentException"),
    ],
)
async def test_create_errors(service: Service, body: object, status: int, type_name: str) -> None:
    await service.create_scale_set("arc")

    reply = await service.call("POST", SCALE_SETS, body=body)

    assert reply.status == status
    assert reply.json["typeName"].endswith(type_name)
    assert reply.json["message"]


async def test_get_by_name_filters_by_group_and_name(
    actions: ActionsEmulator, service: Service
) -> None:
    group = actions.add_runner_group("gpu-group")
    await service.create_scale_set("arc")
    await service.create_scale_set("gpu", runnerGroupId=group)

    in_default = await service.call("GET", SCALE_SETS, params={"runnerGroupId": "1", "name": "arc"})
    wrong_group = await service.call(
        "GET", SCALE_SETS, params={"runnerGroupId": str(group), "name": "arc"}
    )

    assert in_default.status == 200
    assert in_default.json["count"] == 1
    assert in_default.json["value"][0]["name"] == "arc"
    assert wrong_group.json == {"count": 0, "value": []}


async def test_get_by_id(service: Service) -> None:
    created = await service.create_scale_set("arc")

    found = await service.call("GET", f"{SCALE_SETS}/{created['id']}")
    missing = await service.call("GET", f"{SCALE_SETS}/999")

    assert (found.status, found.json["name"]) == (200, "arc")
    assert missing.status == 404
    assert missing.json["typeName"].endswith("RunnerScaleSetNotFoundException")


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"name": "renamed"}, {"name": "renamed", "runnerGroupId": 1}),
        ({"runnerGroupId": "NEW"}, {"name": "arc", "runnerGroupName": "blue"}),
        (
            {"labels": [{"name": "x"}], "RunnerSetting": {"disableUpdate": False}},
            {
                "labels": [{"type": "System", "name": "x"}],
                "RunnerSetting": {"disableUpdate": False},
            },
        ),
        ({"createdOn": "0001-01-01T00:00:00Z", "RunnerSetting": {}}, {"name": "arc"}),
    ],
)
async def test_update_changes_only_the_fields_sent(
    actions: ActionsEmulator,
    service: Service,
    patch: dict[str, object],
    expected: dict[str, object],
) -> None:
    group = actions.add_runner_group("blue")
    created = await service.create_scale_set("arc")
    if patch.get("runnerGroupId") == "NEW":
        patch = {**patch, "runnerGroupId": group}

    reply = await service.call("PATCH", f"{SCALE_SETS}/{created['id']}", body=patch)

    assert reply.status == 200
    assert {key: reply.json[key] for key in expected} == expected
    fetched = await service.call("GET", f"{SCALE_SETS}/{created['id']}")
    assert {key: fetched.json[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("target", "body", "status"),
    [("missing", {"name": "x"}, 404), ("existing", {"name": "taken"}, 409)],
)
async def test_update_errors(service: Service, target: str, body: object, status: int) -> None:
    created = await service.create_scale_set("arc")
    await service.create_scale_set("taken")
    scale_set_id = created["id"] if target == "existing" else 999

    reply = await service.call("PATCH", f"{SCALE_SETS}/{scale_set_id}", body=body)

    assert reply.status == status


async def test_delete_answers_204_then_404(service: Service) -> None:
    created = await service.create_scale_set("arc")

    first = await service.call("DELETE", f"{SCALE_SETS}/{created['id']}")
    second = await service.call("DELETE", f"{SCALE_SETS}/{created['id']}")

    assert (first.status, first.text) == (204, "")
    assert second.status == 404
    gone = await service.call("GET", SCALE_SETS, params={"runnerGroupId": "1", "name": "arc"})
    assert gone.json["count"] == 0


@pytest.mark.parametrize(
    ("path", "name", "expected"),
    [
        ("_apis/runtime/runnergroups/", "Default", [(1, "Default", True)]),
        ("_apis/runtime/runnergroups/", "default", [(1, "Default", True)]),
        ("_apis/runtime/runnergroups/", "blue", [(2, "blue", False)]),
        ("_apis/runtime/runnergroups/", "nope", []),
        ("_apis/runtime/runnergroups", "blue", [(2, "blue", False)]),
    ],
)
async def test_runner_group_by_name(
    actions: ActionsEmulator,
    service: Service,
    path: str,
    name: str,
    expected: list[tuple[int, str, bool]],
) -> None:
    actions.add_runner_group("blue")

    reply = await service.call("GET", path, params={"groupName": name})

    assert reply.status == 200
    assert reply.json["count"] == len(expected)
    assert [(g["id"], g["name"], g["isDefaultGroup"]) for g in reply.json["value"]] == expected
    assert all("size" in g for g in reply.json["value"])
