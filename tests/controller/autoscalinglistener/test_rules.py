"""`rules.plan` as tables: an observed listener in, the steps of its pass out, in order
(docs/autoscaling.md#autoscalinglistener). No cluster: each case is a pure call."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from controller.autoscalinglistener.objects import role, role_binding
from controller.autoscalinglistener.rules import (
    REASON_CONFIG_INVALID,
    REASON_CONTAINER_WAITING,
    REASON_CRASH_LOOPING,
    REASON_TEMPLATE_INVALID,
    REASON_TEMPLATE_REFUSED,
    REFUSALS,
    WAIT,
    Action,
    CreatePod,
    Delete,
    DeleteChild,
    DeleteSelf,
    Ensure,
    Inputs,
    NoteForeign,
    Observed,
    Plan,
    Restarts,
    plan,
)
from controller.github.credentials import VAULT_NOT_SUPPORTED
from controller.runtime.plans import AddFinalizer, RemoveFinalizer, Settle, Warn
from controller.settings import ListenerSettings
from shared.api.names import FINALIZER_AUTOSCALING_LISTENER
from shared.kube.objects import LEASE, POD, ROLE, ROLE_BINDING, SECRET, SERVICE_ACCOUNT
from shared.typedefs import JSONDict

HOME = "arc-systems"
RUNNERS = "arc-runners"
NAME = "arc-listener"
SETTINGS = ListenerSettings(
    controller_namespace=HOME,
    restart_backoff_seconds=5.0,
    restart_backoff_max_seconds=300.0,
    stable_seconds=120.0,
    resync_seconds=300.0,
)
NOW = 1000.0
RUNNER_SET: JSONDict = {"metadata": {"name": "arc", "namespace": RUNNERS, "uid": "set"}}
TOKEN = {"github_token": "ghp_table"}


def listener(*, finalizer: bool = True, deleting: bool = False, **spec: Any) -> JSONDict:
    meta: JSONDict = {"name": NAME, "namespace": HOME, "uid": "l-1", "labels": {"app": "l"}}
    if finalizer:
        meta["finalizers"] = [FINALIZER_AUTOSCALING_LISTENER]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingListener",
        "metadata": meta,
        "spec": {
            "githubConfigUrl": "https://github.com/octo-org",
            "githubConfigSecret": "github-secret",
            "runnerScaleSetId": 1,
            "autoscalingRunnerSetNamespace": RUNNERS,
            "autoscalingRunnerSetName": "arc",
            "ephemeralRunnerSetName": "arc",
            "maxRunners": 5,
            "minRunners": 0,
            "image": "ghcr.io/example/gha-runner-scaler:1",
            **spec,
        },
    }


def observed(obj: JSONDict | None = None, **fields: Any) -> Observed:
    fields.setdefault("runner_set", RUNNER_SET)
    fields.setdefault("inputs", Inputs(credentials=TOKEN))
    return Observed(listener=obj or listener(), settings=SETTINGS, now=NOW, **fields)


def kinds(steps: tuple[Action, ...]) -> list[str]:
    """Each step as a short word, for tables."""
    out: list[str] = []
    for step in steps:
        match step:
            case Ensure():
                out.append(f"ensure {step.kind.kind}")
            case Delete():
                out.append(f"delete {step.kind.kind} {step.name}")
            case DeleteChild():
                out.append(f"delete child {step.child[0].kind} {step.child[2]}")
            case CreatePod():
                out.append(f"create pod {step.desired['metadata']['name']}")
            case Warn():
                out.append(f"warn {step.reason}")
            case Settle():
                out.append(f"settle {step.reason}")
            case _:
                out.append(type(step).__name__)
    return out


SETTLES = [f"settle {reason}" for reason in REFUSALS]
RBAC = ["ensure ServiceAccount", "ensure Role", "ensure RoleBinding"]


def pods_of(obj: JSONDict, **status: Any) -> dict[int, JSONDict]:
    """The pods a first pass over `obj` creates, as the cache would show them with `status`."""
    made = plan(observed(obj))
    pods: dict[int, JSONDict] = {}
    for step in made.steps:
        if isinstance(step, CreatePod):
            pods[step.replica] = {**copy.deepcopy(step.desired), "status": status}
    return pods


def ready(**extra: Any) -> JSONDict:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "listener", "ready": True, "state": {"running": {}}}],
        **extra,
    }


# --- the branches before the children ----------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "want"),
    [
        pytest.param(
            observed({**listener(), "metadata": {**listener()["metadata"], "namespace": "x"}}),
            Plan(steps=(NoteForeign(),), why=(f"not reconciled: listeners live in {HOME}",)),
            id="foreign-said-once",
        ),
        pytest.param(
            observed(
                {**listener(), "metadata": {**listener()["metadata"], "namespace": "x"}},
                foreign_said=True,
            ),
            Plan(),
            id="foreign-then-quiet",
        ),
        pytest.param(
            observed(listener(finalizer=False)),
            Plan(steps=(AddFinalizer(),), why=("finalizer added",)),
            id="finalizer",
        ),
        pytest.param(
            observed(runner_set=None),
            Plan(
                steps=(DeleteSelf(),),
                why=("its AutoscalingRunnerSet is gone: deleting the listener",),
            ),
            id="set-gone",
        ),
        pytest.param(
            observed(listener(vaultConfig={"type": "azure_key_vault"})),
            Plan(
                steps=(
                    *[Settle(r) for r in REFUSALS if r != "VaultNotSupported"],
                    Warn("VaultNotSupported", VAULT_NOT_SUPPORTED),
                ),
                why=("no listener pod: VaultNotSupported",),
            ),
            id="vault",
        ),
        pytest.param(observed(inputs=None), Plan(read=True), id="reads-the-children"),
        pytest.param(
            observed(listener(finalizer=False, deleting=True)),
            Plan(running=False),
            id="deleting-without-finalizer",
        ),
    ],
)
def test_before_the_children(case: Observed, want: Plan) -> None:
    assert plan(case) == want


def test_a_foreign_listener_is_left_even_when_deleting() -> None:
    obj = listener(deleting=True)
    obj["metadata"]["namespace"] = "elsewhere"
    assert plan(observed(obj, foreign_said=True)) == Plan()


# --- deletion -----------------------------------------------------------------------------------


CHILDREN = [
    f"delete child Secret {NAME}-config",
    f"delete child RoleBinding {NAME}",
    f"delete child Role {NAME}",
    f"delete child ServiceAccount {NAME}",
]


@pytest.mark.parametrize(
    ("spec", "fields", "steps", "requeue", "owed"),
    [
        pytest.param(
            {},
            {"pods": {0: {"metadata": {"name": NAME}}}},
            [f"delete Pod {NAME}"],
            WAIT,
            False,
            id="pods-first",
        ),
        pytest.param(
            {},
            {
                "pods": {
                    0: {"metadata": {"name": NAME, "deletionTimestamp": "t"}},
                    2: {"metadata": {"name": f"{NAME}-2"}},
                }
            },
            [f"delete Pod {NAME}-2"],
            WAIT,
            True,
            id="pods-terminating-wait-and-standby-owes-the-lease",
        ),
        pytest.param({}, {}, CHILDREN, None, False, id="children-once-pods-gone"),
        pytest.param(
            {"proxy": {"http": {"url": "http://p:3128"}}, "listenerReplicas": 2},
            {},
            [
                CHILDREN[0],
                f"delete child Secret {NAME}-proxy",
                f"delete child Lease {NAME}",
                *CHILDREN[1:],
            ],
            None,
            False,
            id="proxy-and-lease-only-when-made",
        ),
        pytest.param(
            {},
            {"lease_owed": True},
            [CHILDREN[0], f"delete child Lease {NAME}", *CHILDREN[1:]],
            None,
            True,
            id="lease-owed-after-scale-down",
        ),
    ],
)
def test_deletion(
    spec: JSONDict,
    fields: dict[str, Any],
    steps: list[str],
    requeue: float | None,
    owed: bool,
) -> None:
    made = plan(observed(listener(deleting=True, **spec), **fields))
    assert kinds(made.steps) == steps
    assert made.requeue_after == requeue
    assert made.running is False
    assert made.lease_owed is owed
    assert made.finalizing is (not fields.get("pods"))


def test_deletion_asks_for_each_child_once_then_drops_the_finalizer() -> None:
    obj = listener(deleting=True)
    first = plan(observed(obj))
    gone = frozenset(step.child for step in first.steps if isinstance(step, DeleteChild))
    partly = plan(observed(obj, gone=frozenset(list(gone)[:2])))
    assert len(partly.steps) == 2
    done = plan(observed(obj, gone=gone))
    assert done.steps == (RemoveFinalizer(),)
    assert done.why == ("finalizer removed",)


# --- the children -------------------------------------------------------------------------------


def test_a_new_listener_gets_its_children_then_its_pod() -> None:
    made = plan(observed())
    assert kinds(made.steps) == [*RBAC, *SETTLES, "ensure Secret", f"create pod {NAME}"]
    assert made.why == (f"pod {NAME} created",)
    assert made.describe() == f"pod {NAME} created"
    assert made.running is False
    assert made.restarts == {0: Restarts()}


def test_standby_replicas_get_the_lease_before_their_pods() -> None:
    made = plan(observed(listener(listenerReplicas=2, proxy={"http": {"url": "http://p"}})))
    assert kinds(made.steps) == [
        *RBAC,
        "ensure Secret",
        *SETTLES,
        "ensure Lease",
        "ensure Secret",
        f"create pod {NAME}",
        f"create pod {NAME}-1",
    ]
    lease = next(s for s in made.steps if isinstance(s, Ensure) and s.kind == LEASE)
    assert lease.create_only
    assert lease.drift({"metadata": {}}, lease.desired) == [], "never updated"


@pytest.mark.parametrize(
    ("obj", "inputs", "trust", "reason", "requeue"),
    [
        pytest.param(
            listener(),
            Inputs(credentials={"github_token": ""}),
            False,
            REASON_CONFIG_INVALID,
            SETTINGS.resync_seconds,
            id="config-without-credentials",
        ),
        pytest.param(
            listener(githubServerTLS={"x": 1}),
            Inputs(credentials=TOKEN, root_ca="not a CA"),
            False,
            REASON_CONFIG_INVALID,
            SETTINGS.resync_seconds,
            id="config-with-a-bad-ca",
        ),
        pytest.param(
            listener(template={"spec": {"hostPID": True}}),
            Inputs(credentials=TOKEN),
            False,
            REASON_TEMPLATE_REFUSED,
            None,
            id="template-beyond-the-allow-list",
        ),
        pytest.param(
            listener(
                listenerReplicas=2,
                template={
                    "spec": {
                        "containers": [
                            {
                                "name": "listener",
                                "image": "ghcr.io/actions/gha-runner-scale-set-controller:0.14.2",
                            }
                        ]
                    }
                },
            ),
            Inputs(credentials=TOKEN),
            True,
            REASON_TEMPLATE_INVALID,
            None,
            id="arcs-listener-with-standby",
        ),
    ],
)
def test_a_refused_listener_gets_no_config_and_no_pod(
    obj: JSONDict, inputs: Inputs, trust: bool, reason: str, requeue: float | None
) -> None:
    settings = replace(SETTINGS, trust_templates=trust)
    made = plan(replace(observed(obj, inputs=inputs), settings=settings))
    warned = [s for s in made.steps if isinstance(s, Warn)]
    assert [w.reason for w in warned] == [reason]
    settled = {s.reason for s in made.steps if isinstance(s, Settle)}
    assert settled == set(REFUSALS) - {reason}, "one refusal holds at a time"
    assert not any(isinstance(s, CreatePod) for s in made.steps)
    assert not any(isinstance(s, Ensure) and s.kind == SECRET for s in made.steps)
    assert kinds(made.steps)[:3] == RBAC
    assert made.requeue_after == requeue
    assert made.why == (f"no listener pod: {reason}",)


def test_a_refused_template_is_said_on_the_set_and_its_old_pods_go() -> None:
    obj = listener(template={"spec": {"hostNetwork": True}})
    pods = pods_of(listener(), **ready())
    made = plan(observed(obj, pods=pods))
    [warned] = [s for s in made.steps if isinstance(s, Warn)]
    assert warned.also_on == (RUNNER_SET,)
    assert "listenerTemplate.spec.hostNetwork;" in warned.message
    assert kinds(made.steps)[-1] == f"delete Pod {NAME}"


def test_standby_turned_off_deletes_the_extra_pods_and_the_lease_before_the_role() -> None:
    standby = listener(listenerReplicas=2)
    pods = pods_of(standby, **ready())
    obj = listener()
    made = plan(observed(obj, pods=pods, inputs=Inputs(credentials=TOKEN, role=role(standby))))
    steps = kinds(made.steps)
    assert steps[:4] == [
        "ensure ServiceAccount",
        f"delete Pod {NAME}-1",
        f"delete Lease {NAME}",
        "ensure Role",
    ]
    assert steps.count(f"delete Pod {NAME}-1") == 1, "deleted once in the pass"
    assert made.why[0] == "standby turned off: the extra pods and the Lease go"


def test_a_binding_to_another_role_is_deleted_and_made_again() -> None:
    obj = listener()
    other = role_binding(obj)
    other["roleRef"] = {**other["roleRef"], "name": "other"}
    made = plan(observed(obj, inputs=Inputs(credentials=TOKEN, role_binding=other)))
    steps = kinds(made.steps)
    at = steps.index(f"delete RoleBinding {NAME}")
    assert steps[at + 1] == "ensure RoleBinding"
    ensure = made.steps[at + 1]
    assert isinstance(ensure, Ensure)
    assert (ensure.current, ensure.read) == (None, False), "created, not read again"


@pytest.mark.parametrize(
    ("kind", "edit", "drifted"),
    [
        pytest.param(ROLE, {"rules": []}, ["rules"], id="role-rules"),
        pytest.param(
            ROLE_BINDING,
            {"subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "y"}]},
            ["subjects"],
            id="binding-subjects",
        ),
        pytest.param(
            ROLE_BINDING,
            {
                "subjects": [
                    {"kind": "ServiceAccount", "name": NAME, "namespace": HOME, "apiGroup": ""}
                ]
            },
            [],
            id="binding-as-the-server-stores-it",
        ),
        pytest.param(
            SERVICE_ACCOUNT,
            {"metadata": {"annotations": {"actions.github.com/integrity-hash": "old"}}},
            ["content"],
            id="integrity-hash",
        ),
        pytest.param(
            SERVICE_ACCOUNT,
            {"metadata": {"labels": {"app": "edited"}}},
            ["metadata.labels"],
            id="labels",
        ),
    ],
)
def test_drift_of_a_child(kind: Any, edit: JSONDict, drifted: list[str]) -> None:
    made = plan(observed())
    ensure = next(s for s in made.steps if isinstance(s, Ensure) and s.kind == kind)
    current = copy.deepcopy(ensure.desired)
    for key, value in edit.items():
        if key == "metadata":
            for part, values in value.items():
                current["metadata"][part] = {**current["metadata"][part], **values}
        else:
            current[key] = value
    assert ensure.drift(current, ensure.desired) == drifted


# --- the pods -----------------------------------------------------------------------------------


def pod_steps(made: Plan) -> list[str]:
    return [
        k
        for k in kinds(made.steps)
        if "Pod" in k or "pod" in k or REASON_CONTAINER_WAITING in k or REASON_CRASH_LOOPING in k
    ]


STOPPED = {
    "phase": "Failed",
    "containerStatuses": [{"name": "listener", "state": {"terminated": {"exitCode": 1}}}],
}


@pytest.mark.parametrize(
    ("status", "restarts", "steps", "requeue", "running", "kept"),
    [
        pytest.param(
            None,
            Restarts(count=1, not_before=NOW + 7),
            [],
            7.0,
            False,
            Restarts(count=1, not_before=NOW + 7),
            id="absent-in-backoff-waits",
        ),
        pytest.param(
            None,
            Restarts(count=1, not_before=NOW - 1),
            [f"create pod {NAME}"],
            None,
            False,
            Restarts(count=1, not_before=NOW - 1),
            id="absent-after-backoff-created",
        ),
        pytest.param(
            STOPPED,
            Restarts(),
            [f"delete Pod {NAME}"],
            5.0,
            False,
            Restarts(count=1, not_before=NOW + 5),
            id="stopped-first-time",
        ),
        pytest.param(
            {"reason": "Evicted", "phase": "Failed"},
            Restarts(count=1, ready_since=NOW - 3),
            [f"delete Pod {NAME}"],
            10.0,
            False,
            Restarts(count=2, not_before=NOW + 10),
            id="evicted-doubles",
        ),
        pytest.param(
            STOPPED,
            Restarts(count=2),
            [f"warn {REASON_CRASH_LOOPING}", f"delete Pod {NAME}"],
            20.0,
            False,
            Restarts(count=3, not_before=NOW + 20),
            id="third-stop-is-a-crash-loop",
        ),
        pytest.param(
            STOPPED,
            Restarts(count=12),
            [f"warn {REASON_CRASH_LOOPING}", f"delete Pod {NAME}"],
            300.0,
            False,
            Restarts(count=13, not_before=NOW + 300),
            id="backoff-capped",
        ),
        pytest.param(
            ready(),
            Restarts(count=2, ready_since=NOW - 10),
            [f"settle {REASON_CONTAINER_WAITING}"],
            SETTINGS.stable_seconds,
            True,
            Restarts(count=2, ready_since=NOW - 10),
            id="ready-not-yet-stable",
        ),
        pytest.param(
            ready(),
            Restarts(count=2, ready_since=NOW - 120),
            [f"settle {REASON_CONTAINER_WAITING}"],
            SETTINGS.resync_seconds,
            True,
            Restarts(count=0, ready_since=NOW - 120),
            id="stable-resets-the-backoff",
        ),
        pytest.param(
            ready(),
            Restarts(),
            [f"settle {REASON_CONTAINER_WAITING}"],
            SETTINGS.resync_seconds,
            True,
            Restarts(ready_since=NOW),
            id="ready-from-now",
        ),
        pytest.param(
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "listener", "state": {"running": {}}},
                    {"name": "proxy", "state": {"waiting": {"reason": "ErrImagePull"}}},
                ],
            },
            Restarts(ready_since=NOW - 1),
            [f"warn {REASON_CONTAINER_WAITING}"],
            SETTINGS.resync_seconds,
            True,
            Restarts(),
            id="a-container-cannot-start",
        ),
        pytest.param(
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "listener", "state": {"waiting": {"reason": "ContainerCreating"}}}
                ],
            },
            Restarts(),
            [f"settle {REASON_CONTAINER_WAITING}"],
            SETTINGS.resync_seconds,
            False,
            Restarts(),
            id="starting",
        ),
    ],
)
def test_one_replica(
    status: JSONDict | None,
    restarts: Restarts,
    steps: list[str],
    requeue: float | None,
    running: bool,
    kept: Restarts,
) -> None:
    obj = listener()
    pods = {} if status is None else pods_of(obj, **status)
    made = plan(observed(obj, pods=pods, restarts={0: restarts}))
    assert pod_steps(made) == steps
    assert made.requeue_after == requeue
    assert made.running is running
    assert made.restarts == {0: kept}


def test_crash_loop_message_names_the_replica_with_standby() -> None:
    obj = listener(listenerReplicas=2)
    pods = pods_of(obj, **ready())
    pods[1] = {**pods[1], "status": STOPPED}
    made = plan(observed(obj, pods=pods, restarts={1: Restarts(count=2)}))
    [warned] = [s for s in made.steps if isinstance(s, Warn)]
    assert warned.subject == 1
    assert warned.message == (
        f"listener pod {NAME}-1 stopped 3 times in a row (pod Failed); next start in 20s"
    )
    assert made.running is True, "replica 0 runs"
    assert made.requeue_after == 20.0, "the earliest of the replicas"


def test_a_pod_whose_config_changed_is_made_again() -> None:
    obj = listener()
    pods = pods_of(obj, **ready())
    made = plan(observed(obj, pods=pods, inputs=Inputs(credentials={"github_token": "rotated"})))
    assert pod_steps(made) == [f"delete Pod {NAME}"]
    assert made.why == (f"re-creating listener pod {NAME}: its config changed",)
    assert made.running is None


def test_a_terminating_pod_is_waited_for() -> None:
    obj = listener()
    pods = pods_of(obj)
    pods[0]["metadata"]["deletionTimestamp"] = "t"
    made = plan(observed(obj, pods=pods))
    assert pod_steps(made) == []
    assert made.running is None
    assert made.why == ()


def test_replicas_beyond_listener_replicas_go() -> None:
    pods = pods_of(listener(listenerReplicas=3), **ready())
    made = plan(observed(listener(listenerReplicas=2), pods=pods))
    assert f"delete Pod {NAME}-2" in kinds(made.steps)
    assert made.why == ("1 pod(s) beyond listenerReplicas 2 deleted",)
    assert not any(isinstance(s, Ensure) and s.kind == POD for s in made.steps)


def test_standby_pods_of_an_older_config_are_replaced_one_at_a_time() -> None:
    """A set's own standby (docs/autoscaling.md#listener-standby): its config changing (here
    `maxRunners`), the last replica goes first; the first only once the new one is Ready."""
    standby = listener(listenerReplicas=2)
    granted = Inputs(credentials=TOKEN, role=role(standby))
    old = pods_of(standby, **ready())
    changed = listener(listenerReplicas=2, maxRunners=9)

    first = plan(observed(changed, pods=old, inputs=granted))
    assert [k for k in kinds(first.steps) if k.startswith(("delete", "create"))] == [
        f"delete Pod {NAME}-1"
    ]
    new = pods_of(changed, **ready())
    last = plan(observed(changed, pods={0: old[0], 1: new[1]}, inputs=granted))
    assert [k for k in kinds(last.steps) if k.startswith(("delete", "create"))] == [
        f"delete Pod {NAME}"
    ]
