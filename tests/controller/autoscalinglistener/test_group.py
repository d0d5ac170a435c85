"""Who belongs to a listener group (docs/autoscaling.md#listener-groups), as a tenant would try
to get into one: a group is per runner namespace, its first member's GitHub config is the one
the others must share, and nothing a later set says changes who is served with what."""

from __future__ import annotations

from typing import Any

from controller.autoscalinglistener.group import (
    MAX_MEMBERS,
    Group,
    group_listener,
    group_members,
    group_problem,
)
from shared.api.names import ANNOTATION_LISTENER_GROUP
from shared.typedefs import JSONDict

HOME = "gha-runner-scaler-system"


def listener(
    name: str,
    *,
    namespace: str = "team-a",
    group: str = "linux",
    created: str = "2026-01-01T00:00:00Z",
    home: str = HOME,
    **spec: Any,
) -> JSONDict:
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": {
            "name": name,
            "namespace": home,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "annotations": {ANNOTATION_LISTENER_GROUP: group},
        },
        "spec": {
            "githubConfigUrl": "https://github.com/org",
            "githubConfigSecret": "github-secret",
            "autoscalingRunnerSetNamespace": namespace,
            "autoscalingRunnerSetName": name,
            "ephemeralRunnerSetName": name,
            **spec,
        },
    }


def names(group: Group) -> list[str]:
    return group.member_names()


def test_a_group_of_the_same_name_in_another_namespace_is_another_group() -> None:
    ours = listener("a")
    theirs = listener("b", namespace="team-b")
    group = group_members(ours, [ours, theirs])
    other = group_members(theirs, [ours, theirs])
    assert names(group) == ["a"]
    assert names(other) == ["b"]
    assert group.object_name != other.object_name
    assert group.refused == {} == other.refused


def test_the_first_member_sets_the_config_and_a_later_one_cannot_change_it() -> None:
    first = listener("victim", created="2026-01-01T00:00:00Z")
    later = listener("intruder", created="2026-01-02T00:00:00Z", githubConfigSecret="mine")
    proxied = listener(
        "proxied", created="2026-01-03T00:00:00Z", proxy={"https": {"url": "http://evil"}}
    )
    group = group_members(later, [later, proxied, first])
    assert names(group) == ["victim"]
    assert set(group.refused) == {"intruder", "proxied"}
    assert "spec.githubConfigSecret" in group.refused["intruder"]
    assert "spec.proxy" in group.refused["proxied"]
    # Neither the other set's secret nor its value is named to the refused tenant.
    assert "github-secret" not in group.refused["intruder"]


def test_listeners_outside_the_controller_namespace_or_being_deleted_are_not_members() -> None:
    ours = listener("a")
    foreign = listener("b", home="arc-systems")
    leaving = listener("c")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-05T00:00:00Z"
    assert names(group_members(ours, [ours, foreign, leaving])) == ["a"]


def test_a_group_name_that_cannot_name_objects_is_refused() -> None:
    assert group_problem(listener("a", group="Linux_x64")) is not None
    assert group_problem(listener("a", group="x" * 41)) is not None
    assert group_problem(listener("a", group="x" * 40)) is None
    # A set with a problem is no member, so it never becomes the first one.
    bad = listener("bad", group="Linux", created="2025-01-01T00:00:00Z")
    good = listener("good", group="linux")
    assert names(group_members(good, [bad, good])) == ["good"]


def test_a_group_runs_the_most_replicas_any_member_asks_and_serves_each_with_a_lease() -> None:
    """Standby is the group's: every pod serves every member, so a member asking for one pod
    is served by the group's standby too, its config naming its Lease (without one, each pod
    would open a session for it). Members need not agree on `listenerReplicas`."""
    one = listener("one", created="2026-01-01T00:00:00Z")
    two = listener("two", created="2026-01-02T00:00:00Z", listenerReplicas=2)
    group = group_members(one, [one, two])
    assert names(group) == ["one", "two"]
    assert group.refused == {}
    assert group.replicas == 2
    assert group.served(one)["spec"]["listenerReplicas"] == 2
    assert one["spec"].get("listenerReplicas") is None, "the cached listener is not changed"
    assert group_listener(group)["spec"]["listenerReplicas"] == 2
    assert group_members(one, [one]).replicas == 1


def test_a_group_serves_at_most_max_members_and_the_newest_beyond_are_refused() -> None:
    listeners = [
        listener(f"s{index:03}", created=f"2026-01-01T00:{index // 60:02}:{index % 60:02}Z")
        for index in range(MAX_MEMBERS + 2)
    ]
    group = group_members(listeners[0], listeners)
    assert names(group) == [f"s{index:03}" for index in range(MAX_MEMBERS)]
    assert sorted(group.refused) == [f"s{MAX_MEMBERS:03}", f"s{MAX_MEMBERS + 1:03}"]
    assert "name another group" in group.refused[f"s{MAX_MEMBERS:03}"]
