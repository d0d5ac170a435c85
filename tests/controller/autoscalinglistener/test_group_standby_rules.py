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


THIRD = member("c", "2026-01-03T00:00:00Z")


def ready(pod: JSONDict) -> JSONDict:
    return {
        **pod,
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "listener", "state": {"running": {}}}],
        },
    }


def pods_deleted(steps: tuple[object, ...]) -> list[str]:
    return [s.name for s in steps if isinstance(s, Delete) and s.kind == POD]


def pods_created(steps: tuple[object, ...]) -> list[int]:
    return [s.replica for s in steps if isinstance(s, CreatePod)]


def test_a_config_change_replaces_the_pods_one_at_a_time_while_the_other_serves() -> None:
    """Standby before and after (the Role grants Leases): c joining makes every pod's config
    change, but the last replica is replaced first, and the first only once the new one is
    Ready to take the sessions the first releases on SIGTERM."""
    both = role_rules("a", "b", leases=["a", "b"])
    name = group_members(FIRST, [FIRST]).object_name
    old = {replica: ready(pod) for replica, pod in made_pods([FIRST, SECOND], both).items()}
    three = [FIRST, SECOND, THIRD]

    first = plan(observed(three, both, old))
    assert pods_deleted(first.steps) == [f"{name}-1"]
    assert pods_created(first.steps) == []

    replacing = plan(observed(three, both, {0: old[0]}))
    assert pods_created(replacing.steps) == [1]
    assert pods_deleted(replacing.steps) == []
    [new] = [s.desired for s in replacing.steps if isinstance(s, CreatePod)]

    starting = plan(observed(three, both, {0: old[0], 1: new}))
    assert pods_deleted(starting.steps) == [], "the new pod is not Ready yet"
    assert starting.running is True, "the old pod still serves"

    last = plan(observed(three, both, {0: old[0], 1: ready(new)}))
    assert pods_deleted(last.steps) == [name]


def test_old_pods_go_at_once_when_none_is_ready_or_standby_was_off() -> None:
    both = role_rules("a", "b", leases=["a", "b"])
    name = group_members(FIRST, [FIRST]).object_name
    three = [FIRST, SECOND, THIRD]
    old = made_pods([FIRST, SECOND], both)
    assert pods_deleted(plan(observed(three, both, old)).steps) == [name, f"{name}-1"]
    # Turning standby on: the pods running hold sessions without a Lease, which no standby
    # could take over from.
    serving = {replica: ready(pod) for replica, pod in old.items()}
    without = role_rules("a", "b")
    assert pods_deleted(plan(observed(three, without, serving)).steps) == [name, f"{name}-1"]
