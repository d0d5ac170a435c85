"""A listener group's standby as `rules.plan` decides it (docs/autoscaling.md#standby-for-a-group),
in the order that matters while pods are replaced: the pods still running keep the Lease rules
they were made with, and a Lease of a set no longer served goes only once no pod serves it,
before its rule. No cluster: each case is a pure call on the group's first member."""

from __future__ import annotations

from typing import Any

from controller.autoscalinglistener.group import group_members
from controller.autoscalinglistener.objects import role_rules
from controller.autoscalinglistener.rules import CreatePod, Delete, Ensure, Inputs, Observed, plan
from shared.api.names import ANNOTATION_INTEGRITY_HASH, FINALIZER_AUTOSCALING_LISTENER
from shared.kube.objects import LEASE, POD, ROLE
from shared.typedefs import JSONDict
from tests.controller.autoscalinglistener.test_group import listener as group_listener
from tests.controller.autoscalinglistener.test_rules import HOME, NOW, RUNNER_SET, SETTINGS, TOKEN


def member(name: str, created: str, **spec: Any) -> JSONDict:
    made = group_listener(name, created=created, home=HOME, runnerScaleSetId=1, **spec)
    made["metadata"]["finalizers"] = [FINALIZER_AUTOSCALING_LISTENER]
    return made


FIRST = member("a", "2026-01-01T00:00:00Z", listenerReplicas=2)
SECOND = member("b", "2026-01-02T00:00:00Z")


def observed(members: list[JSONDict], role: list[JSONDict], pods: dict[int, JSONDict]) -> Observed:
    return Observed(
        listener=FIRST,
        settings=SETTINGS,
        now=NOW,
        runner_set=RUNNER_SET,
        pods=pods,
        inputs=Inputs(credentials=TOKEN, role={"rules": role}),
        group=group_members(FIRST, members),
    )


def made_pods(members: list[JSONDict], role: list[JSONDict]) -> dict[int, JSONDict]:
    """The pods the group's pass creates, as they then run."""
    return {
        step.replica: step.desired
        for step in plan(observed(members, role, {})).steps
        if isinstance(step, CreatePod)
    }


def leases_deleted(steps: tuple[object, ...]) -> list[str]:
    return [s.name for s in steps if isinstance(s, Delete) and s.kind == LEASE]


def role_written(steps: tuple[object, ...]) -> list[JSONDict]:
    [rules] = [s.desired["rules"] for s in steps if isinstance(s, Ensure) and s.kind == ROLE]
    return list(rules)


def test_a_member_gone_keeps_its_lease_and_rule_while_an_old_pod_runs_then_loses_both() -> None:
    both = role_rules("a", "b", leases=["a", "b"])
    old = made_pods([FIRST, SECOND], both)
    assert sorted(old) == [0, 1]

    # b left: the pods made for both are outdated and still run.
    replacing = plan(observed([FIRST], both, old))
    assert leases_deleted(replacing.steps) == []
    assert role_written(replacing.steps) == both, "the old pods may still release b's Lease"
    pods = group_members(FIRST, [FIRST]).object_name
    deleted = [s.name for s in replacing.steps if isinstance(s, Delete) and s.kind == POD]
    assert deleted == [pods, f"{pods}-1"], "and are made again"

    # Only the pods made without b run: its Lease goes, then its rule.
    new = made_pods([FIRST], both)
    done = plan(observed([FIRST], both, new))
    assert leases_deleted(done.steps) == ["b"]
    kinds = [(s.kind, getattr(s, "name", "")) for s in done.steps if isinstance(s, Delete | Ensure)]
    assert kinds.index((LEASE, "b")) < [k for k, _ in kinds].index(ROLE)
    assert role_written(done.steps) == role_rules("a", leases=["a"])


def test_pods_with_another_hash_or_beyond_the_replicas_count_as_old() -> None:
    both = role_rules("a", "b", leases=["a", "b"])
    new = made_pods([FIRST, SECOND], both)
    edited = {
        **new[1],
        "metadata": {**new[1]["metadata"], "annotations": {ANNOTATION_INTEGRITY_HASH: "another"}},
    }
    for pods in ({0: new[0], 1: edited}, {**new, 2: new[1]}):
        steps = plan(
            observed([FIRST, SECOND], role_rules("a", "b", leases=["a", "b", "c"]), pods)
        ).steps
        assert leases_deleted(steps) == [], "c's Lease stays while an old pod may hold it"
    settled = plan(observed([FIRST, SECOND], role_rules("a", leases=["a", "c"]), new))
    assert leases_deleted(settled.steps) == ["c"]
    assert role_written(settled.steps) == role_rules("a", "b", leases=["a", "b"])
