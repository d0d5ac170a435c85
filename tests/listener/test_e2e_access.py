"""Kubernetes access: checked at start, and its loss ends the listener instead of leaving it up.

At start the listener reviews its own permissions (SelfSubjectAccessReview) and refuses to start
(exit 2) naming the Role rule to add, ARC's own listener Role (no `get` on ephemeralrunners)
included. Later, a set patch refused for good (401, 403, 404) turns /readyz non-200 and ends the
process with exit 1 and one line naming what is missing (docs/listener.md, "Permissions" and
"Recovery").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from shared.api.kinds import EPHEMERAL_RUNNER_SET
from shared.kube.objects import ROLE
from tests.listener.conftest import (
    DEADLINE,
    LISTENER_SA,
    RUNNER_SET,
    Cluster,
    GitHub,
    Process,
    StartListener,
    listener_config,
    messages,
    readyz_until,
    wait_ready,
)

RUNNER_RULE = {
    "apiGroups": ["actions.github.com"],
    "resources": ["ephemeralrunners", "ephemeralrunners/status"],
    "verbs": ["get", "patch"],
}
SET_RULE = {
    "apiGroups": ["actions.github.com"],
    "resources": ["ephemeralrunnersets"],
    "resourceNames": [RUNNER_SET],
    "verbs": ["patch"],
}
# The rules ARC's controller gives the listener's Role (docs/listener.md#permissions).
ARC_LISTENER_RULES = [
    {**SET_RULE},
    {**RUNNER_RULE, "verbs": ["patch"]},
]
GET_RULE = "{apiGroups: [actions.github.com], resources: [ephemeralrunners], verbs: [get]}"
STATUS_RULE = (
    "{apiGroups: [actions.github.com], resources: [ephemeralrunners/status], verbs: [patch]}"
)
SET_PATCH_RULE = (
    "{apiGroups: [actions.github.com], resources: [ephemeralrunnersets], "
    f"resourceNames: [{RUNNER_SET}], verbs: [patch]}}"
)


async def set_role_rules(cluster: Cluster, rules: list[dict[str, Any]]) -> None:
    await cluster.objects.patch(ROLE, cluster.namespace, LISTENER_SA, {"rules": rules})


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR and record.name == "listener"
    ]


async def test_arc_listener_role_without_get_refuses_to_start_with_the_rule_to_add(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await set_role_rules(cluster, ARC_LISTENER_RULES)
    running = await start_listener()
    assert await asyncio.wait_for(running.task, DEADLINE) == 2
    [line] = refusals(caplog)
    assert line.startswith("cannot start: the Kubernetes identity ")
    assert f'"{cluster.listener_user}" may not get ephemeralrunners in namespace' in line
    assert line.endswith(f"add to its Role: {GET_RULE}")
    # Refused before it touched anything: no session, no patch.
    assert github.emulator.state.count("create_session") == 0
    assert cluster.kube.requests.count(user=cluster.listener_user, verb="patch") == 0
    reviews = cluster.kube.requests.count(
        user=cluster.listener_user, resource="selfsubjectaccessreviews", code=201
    )
    assert reviews == 3


async def test_api_server_without_self_subject_review_still_checks_the_permissions(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """API servers before 1.28 answer 404 to a SelfSubjectReview: the identity is unknown, the
    access reviews still decide."""
    await set_role_rules(cluster, ARC_LISTENER_RULES)
    cluster.kube.faults.inject(verb="create", resource="selfsubjectreviews", status=404)
    running = await start_listener()
    assert await asyncio.wait_for(running.task, DEADLINE) == 2
    [line] = refusals(caplog)
    assert line.startswith("cannot start: the listener's Kubernetes identity may not get ")
    assert line.endswith(f"add to its Role: {GET_RULE}")


async def test_identity_without_the_listener_role_is_told_every_rule(
    cluster: Cluster,
    github: GitHub,
    start_listener: StartListener,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "nobody", "namespace": cluster.namespace},
        }
    )
    running = await start_listener(
        kube_token=cluster.kube.service_account_token(cluster.namespace, "nobody")
    )
    assert await asyncio.wait_for(running.task, DEADLINE) == 2
    [line] = refusals(caplog)
    assert f'"system:serviceaccount:{cluster.namespace}:nobody" may not get' in line
    assert line.endswith(f"add to its Role: {GET_RULE} and {STATUS_RULE} and {SET_PATCH_RULE}")
    assert cluster.forbidden_requests() == 0


def _edit_role(cluster: Cluster) -> Coroutine[Any, Any, None]:
    return set_role_rules(cluster, [RUNNER_RULE])


def _delete_set(cluster: Cluster) -> Coroutine[Any, Any, None]:
    async def delete() -> None:
        await cluster.objects.delete(EPHEMERAL_RUNNER_SET, cluster.namespace, RUNNER_SET)

    return delete()


def _revoke_token(cluster: Cluster) -> Coroutine[Any, Any, None]:
    async def revoke() -> None:
        del cluster.kube.tokens.by_token[cluster.listener_token]

    return revoke()


@pytest.mark.parametrize(
    ("lose_access", "code", "why"),
    [
        (_edit_role, 403, "the Kubernetes identity {user} lacks the Role rule " + SET_PATCH_RULE),
        (_delete_set, 404, "the EphemeralRunnerSet (or its CRD) does not exist"),
        (
            _revoke_token,
            401,
            "the API server no longer accepts the credentials of the Kubernetes identity {user} "
            "(an expired or revoked token?)",
        ),
    ],
    ids=["role-edited", "set-deleted", "token-revoked"],
)
async def test_set_patch_refused_for_good_goes_unready_then_exits_1(
    cluster: Cluster,
    github: GitHub,
    spawn: Any,
    lose_access: Callable[[Cluster], Coroutine[Any, Any, None]],
    code: int,
    why: str,
) -> None:
    process: Process = await spawn(listener_config(cluster, github))
    await wait_ready(process)
    # Hold the session's deletion on the way out, so /readyz can be read before the exit.
    github.emulator.faults.inject("delete_session", latency=3.0)
    await lose_access(cluster)
    github.enqueue(1)
    reason = await readyz_until(process, ready=False)
    assert await process.wait() == 1
    target = f'patch ephemeralrunnersets "{cluster.namespace}/{RUNNER_SET}"'
    assert reason.startswith(f"not ready: Kubernetes refused {target}")
    [line] = [message for message in messages(process) if "Kubernetes refused" in message]
    user = f'"{cluster.listener_user}"'
    assert line.startswith(f"listener stopped: Kubernetes refused {target}: ")
    assert why.replace("{user}", user) in line
    assert f"({code} " in line
    # Refused once, not retried (a 401 is answered before the request is attributed to a
    # resource, so count by verb and code).
    assert cluster.kube.requests.count(verb="patch", code=code) == 1
    assert github.emulator.state.count("delete_session", status=204) == 1
