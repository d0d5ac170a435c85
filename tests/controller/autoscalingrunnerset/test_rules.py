"""`rules.plan`, the AutoscalingRunnerSet's decisions, as tables: an observed state in, the
steps a pass takes (in order) out. Pure and fast; tests/controller/autoscalingrunnerset/
test_reconciler.py drives the same decisions against the emulators."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controller.autoscalingrunnerset import rules
from controller.autoscalingrunnerset.objects import new_listener, new_runner_set
from controller.autoscalingrunnerset.rules import (
    Ask,
    Checked,
    Failed,
    Missing,
    Observed,
    Plan,
    Recorded,
)
from controller.github.clients import GitHubConfigError
from controller.github.scalesets import ScaleSet
from controller.runtime.plans import Settle, Warn
from controller.settings import AutoscalingSettings
from shared.actions.errors import ActionsServerError
from shared.kube.errors import NotFound as KubeNotFound
from shared.typedefs import JSONDict

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SETTINGS = AutoscalingSettings(controller_namespace="gha-system", listener_image="listener:1")
FINALIZER = "autoscalingrunnerset.actions.github.com/finalizer"
SCALE_SET_ID = "7"
CHECKED = Checked()
DOCKER_RUN = {"gha-runner-scaler/listener": "docker-run"}


def ars(**changes: object) -> JSONDict:
    """A set that registered scale set 7 in the Default group, finalizer on."""
    obj: JSONDict = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": "arc",
            "namespace": "ns",
            "uid": "set-uid",
            "generation": 3,
            "finalizers": [FINALIZER],
            "annotations": {
                "runner-scale-set-id": SCALE_SET_ID,
                "actions.github.com/runner-scale-set-name": "arc",
                "actions.github.com/runner-group-name": "Default",
            },
        },
        "spec": {
            "githubConfigUrl": "https://github.com/owner/repo",
            "githubConfigSecret": "github-secret",
            "runnerScaleSetName": "arc",
            "template": {"spec": {"containers": [{"name": "runner", "image": "runner:1"}]}},
        },
    }
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = obj
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    # As a pass that saw this spec and these labels left it; a test changing either after this
    # makes a set whose change the next pass sees.
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations.setdefault(rules.ANNOTATION_CHANGE_HASH, rules.change_hash(obj))
    return obj


def runner_set(of: JSONDict, **changes: object) -> JSONDict:
    """The runner set a pass made for `of`, as the cache shows it."""
    made = new_runner_set(of, scale_set_id=int(SCALE_SET_ID), excluded_prefixes=())
    made["metadata"].update(uid="ers-uid", creationTimestamp="2026-01-01T00:00:00Z")
    for key, value in changes.items():
        section, field = key.split("__")
        made.setdefault(section, {})[field] = value
    return made


def listener(of: JSONDict, *, namespace: str = SETTINGS.controller_namespace) -> JSONDict:
    made = new_listener(
        of,
        namespace=namespace,
        scale_set_id=int(SCALE_SET_ID),
        runner_set="arc",
        image=SETTINGS.listener_image,
        image_pull_secrets=(),
        excluded_prefixes=(),
    )
    made["metadata"]["uid"] = f"listener-uid-{namespace}"
    return made


def observed(
    obj: JSONDict,
    *,
    runner_sets: tuple[JSONDict, ...] = (),
    listeners: tuple[JSONDict, ...] = (),
    github: rules.Answer | None = CHECKED,
    conditions: dict[str, JSONDict] | None = None,
) -> Observed:
    named = next(
        (
            item
            for item in listeners
            if item["metadata"]["namespace"] == SETTINGS.controller_namespace
        ),
        None,
    )
    return Observed(
        set=obj,
        runner_sets=runner_sets,
        listeners=listeners,
        named_listener=named,
        conditions=conditions or {},
        settings=SETTINGS,
        now=NOW,
        github=github,
    )


def converged(obj: JSONDict | None = None) -> Observed:
    obj = obj or ars()
    return observed(obj, runner_sets=(runner_set(obj),), listeners=(listener(obj),))


def deleting(obj: JSONDict) -> JSONDict:
    obj["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return obj


def steps(plan: Plan) -> list[str]:
    """Each step as one word and what it is about."""
    out = []
    for step in plan.steps:
        match step:
            case rules.Create(kind, desired) | rules.Delete(kind, desired):
                out.append(f"{type(step).__name__} {kind.kind} {desired['metadata']['name']}")
            case rules.Patch(kind, target, spec):
                out.append(f"Patch {kind.kind} {target['metadata']['name']} {sorted(spec)}")
            case Warn(reason) | Settle(reason) | rules.Announce(reason):
                out.append(f"{type(step).__name__} {reason}")
            case rules.WriteStatus(desired):
                out.append(f"WriteStatus {desired['phase']}")
            case rules.UpdateRunnerSet(target, _, _, spec):
                out.append(f"UpdateRunnerSet {target['metadata']['name']} {sorted(spec)}")
            case rules.DeleteScaleSet(scale_set_id, name):
                out.append(f"DeleteScaleSet {scale_set_id} {name}")
            case rules.StripCleanupProtection(kind, _, name):
                out.append(f"StripCleanupProtection {kind.kind} {name}")
            case _:
                out.append(type(step).__name__)
    return out


def conditions(plan: Plan) -> dict[str, tuple[str, str]]:
    written = (plan.edits.get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c["reason"]) for c in written}


SETTLE_RUNNING = ["Settle InvalidName", "Settle VaultNotSupported"]
SETTLE_REGISTERED = [*SETTLE_RUNNING, "Settle ScaleSetRegistrationFailed"]
SETTLE_ALL = [*SETTLE_REGISTERED, "Settle ForeignListener", "Settle InvalidScalingPolicy"]
RUNNING = [*SETTLE_ALL, "Settle RunnerOutdated", "WriteStatus Running"]
PENDING = [*SETTLE_ALL, "Settle RunnerOutdated", "WriteStatus Pending"]


def _with_listener_replicas() -> Observed:
    now = converged()
    return replace(now, set=ars(spec__listenerReplicas=2))


def _with_max_runners() -> Observed:
    now = converged()
    return replace(now, set=ars(spec__maxRunners=9))


def _with_new_image() -> Observed:
    obj = ars()
    now = converged(obj)
    newer = copy.deepcopy(obj)
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = "runner:2"
    return replace(now, set=newer)


def _outdated() -> Observed:
    obj = ars()
    held = runner_set(
        obj,
        spec__replicas=3,
        spec__actionableRevision=2,
        status__phase="Outdated",
        status__appliedActionableRevision=2,
    )
    return observed(obj, runner_sets=(held,), listeners=(listener(obj),))


def _older_and_newer() -> Observed:
    obj = ars()
    older = runner_set(obj)
    older["metadata"].update(name="arc-abcde", uid="old", creationTimestamp="2025-01-01T00:00:00Z")
    newer = runner_set(obj)
    return observed(obj, runner_sets=(older, newer), listeners=(listener(obj),))


def _adopted() -> Observed:
    obj = ars()
    arc = runner_set(obj)
    arc["metadata"]["name"] = "arc-xyz12"
    arc["metadata"]["annotations"]["actions.github.com/runner-spec-hash"] = "arc-made-digest"
    return observed(obj, runner_sets=(arc,), listeners=(listener(obj),))


PASSES: list[tuple[str, Callable[[], Observed], list[str]]] = [
    ("converged: the status, nothing else", converged, RUNNING),
    (
        "no finalizer: added, nothing else",
        lambda: observed(ars(metadata__finalizers=None), github=None),
        ["AddFinalizer"],
    ),
    (
        "a name that is not one: refused, nothing made",
        lambda: observed(ars(spec__githubConfigSecret="../secret"), github=None),
        ["Warn InvalidName", "WriteSet"],
    ),
    (
        "no runnerScaleSetName: defaulted",
        lambda: observed(ars(spec__runnerScaleSetName=None), github=None),
        ["Settle InvalidName", "WriteSet"],
    ),
    (
        "Azure Key Vault: refused",
        lambda: observed(
            ars(spec__vaultConfig={"type": "azure_key_vault"}),
            github=None,
        ),
        ["Settle InvalidName", "Warn VaultNotSupported", "WriteSet"],
    ),
    (
        "GitHub registered it: recorded",
        lambda: observed(
            ars(metadata__annotations={}), github=Recorded(ScaleSet(9, "arc", "Default"))
        ),
        ["Settle InvalidName", "WriteSet"],
    ),
    (
        "GitHub lost it: the id forgotten, said",
        lambda: observed(ars(), github=Missing()),
        ["Settle InvalidName", "Warn ScaleSetMissing", "WriteSet"],
    ),
    (
        "GitHub refused: the condition, said",
        lambda: observed(ars(), github=Failed(GitHubConfigError("NotFound", "no Secret"))),
        ["Settle InvalidName", "Warn ScaleSetRegistrationFailed", "WriteSet"],
    ),
    (
        "no runner set: created at 0",
        lambda: observed(ars()),
        [*SETTLE_REGISTERED, "Create EphemeralRunnerSet arc"],
    ),
    (
        "the only runner set is being deleted: wait",
        lambda: observed(ars(), runner_sets=(deleting(runner_set(ars())),)),
        SETTLE_REGISTERED,
    ),
    (
        "an older runner set: drained",
        _older_and_newer,
        [
            *SETTLE_REGISTERED,
            "Announce RunnerSetDrained",
            "Delete EphemeralRunnerSet arc-abcde",
            *RUNNING[len(SETTLE_REGISTERED) :],
        ],
    ),
    (
        "a new runner image: the runner set's revision, and the pass stops",
        _with_new_image,
        [
            *SETTLE_REGISTERED,
            "UpdateRunnerSet arc ['actionableRevision', 'ephemeralRunnerSpec']",
            # The spec changed: `Pending` at once, as ARC writes it, though the pass stops.
            "WriteStatus Pending",
        ],
    ),
    (
        "ARC's runner set: adopted with its runners",
        _adopted,
        [*SETTLE_REGISTERED, "UpdateRunnerSet arc-xyz12 ['ephemeralRunnerSpec']"],
    ),
    (
        "outdated: listener stopped, runner set held at 0",
        _outdated,
        [
            *SETTLE_REGISTERED,
            "Delete AutoscalingListener arc-{hash}-listener",
            "Patch EphemeralRunnerSet arc ['patchID', 'replicas']",
            "Warn RunnerOutdated",
            "WriteStatus Outdated",
        ],
    ),
    (
        "ARC's listener in another namespace: said",
        lambda: replace(
            converged(),
            listeners=(*converged().listeners, listener(ars(), namespace="arc-systems")),
        ),
        [
            *SETTLE_REGISTERED,
            "Warn ForeignListener",
            "Settle InvalidScalingPolicy",
            "Settle RunnerOutdated",
            "WriteStatus Running",
        ],
    ),
    (
        "an invalid scaling policy: said, the listener left as it is",
        lambda: replace(converged(), set=ars(spec__scalingPolicy={"warmTailSeconds": 5})),
        [
            *SETTLE_REGISTERED,
            "Settle ForeignListener",
            "Warn InvalidScalingPolicy",
            "Settle RunnerOutdated",
            "WriteStatus Running",
        ],
    ),
    (
        "no listener: created",
        lambda: observed(ars(), runner_sets=(runner_set(ars()),)),
        # Pending until a pass finds the listener made.
        [*SETTLE_ALL, "Create AutoscalingListener arc-{hash}-listener", *PENDING[-2:]],
    ),
    (
        "a new listenerReplicas: patched in place",
        _with_listener_replicas,
        [
            *SETTLE_ALL,
            "Patch AutoscalingListener arc-{hash}-listener ['listenerReplicas']",
            *RUNNING[-2:],
        ],
    ),
    (
        "a new maxRunners: the listener re-created",
        _with_max_runners,
        [*SETTLE_ALL, "Delete AutoscalingListener arc-{hash}-listener", *PENDING[-2:]],
    ),
    (
        "docker run: no listener",
        lambda: replace(
            converged(),
            set=ars(metadata__annotations={**ars()["metadata"]["annotations"], **DOCKER_RUN}),
        ),
        [
            *SETTLE_REGISTERED,
            "Settle ForeignListener",
            "Delete AutoscalingListener arc-{hash}-listener",
            *RUNNING[-2:],
        ],
    ),
]


@pytest.mark.parametrize(
    ("make", "expected"), [pytest.param(make, want, id=why) for why, make, want in PASSES]
)
def test_a_pass_takes_these_steps(make: Callable[[], Observed], expected: list[str]) -> None:
    observed = make()
    name = listener(observed.set)["metadata"]["name"]
    plan = rules.plan(observed)
    assert plan.ask is None
    assert steps(plan) == [step.replace("arc-{hash}-listener", name) for step in expected]


@pytest.mark.parametrize(
    ("obj", "listeners", "ask"),
    [
        pytest.param(ars(metadata__annotations={}), (), Ask.REGISTER, id="no id: register"),
        pytest.param(
            ars(metadata__annotations={"runner-scale-set-id": "7"}),
            (),
            Ask.MOVE,
            id="no group recorded: move",
        ),
        pytest.param(ars(spec__runnerGroup="other"), (), Ask.MOVE, id="another group: move"),
        pytest.param(
            ars(spec__runnerScaleSetName="renamed"), (), Ask.RENAME, id="another name: rename"
        ),
        pytest.param(ars(), (), Ask.VERIFY, id="a listener to make: check it exists"),
        pytest.param(ars(), (listener(ars()),), Ask.CHECK, id="a listener: the config only"),
        pytest.param(
            ars(metadata__annotations={**ars()["metadata"]["annotations"], **DOCKER_RUN}),
            (),
            Ask.CHECK,
            id="docker run: the config only",
        ),
    ],
)
def test_github_is_asked_before_the_scale_set_is_decided(
    obj: JSONDict, listeners: tuple[JSONDict, ...], ask: Ask
) -> None:
    plan = rules.plan(observed(obj, listeners=listeners, github=None))
    assert (plan.ask, plan.steps) == (ask, ())


def test_github_is_not_asked_about_a_set_it_cannot_ask_with() -> None:
    for obj in (
        ars(spec__runnerScaleSetName=None),
        ars(spec__vaultConfig={"type": "azure_key_vault"}),
        ars(spec__githubConfigSecret="../secret"),
        ars(metadata__finalizers=None),
        deleting(ars()),
    ):
        assert rules.plan(observed(obj, github=None)).ask is None


def test_a_recorded_scale_set_is_written_on_the_set() -> None:
    plan = rules.plan(
        observed(ars(metadata__annotations={}), github=Recorded(ScaleSet(9, "arc", "group")))
    )
    assert plan.edits["metadata"]["annotations"] == {
        "runner-scale-set-id": "9",
        "actions.github.com/runner-scale-set-name": "arc",
        "actions.github.com/runner-group-name": "group",
    }
    assert plan.edits["metadata"]["labels"] == {
        "actions.github.com/organization": "owner",
        "actions.github.com/repository": "repo",
    }


def test_a_refusal_is_said_once_and_raised_every_time() -> None:
    error = GitHubConfigError("NotFound", "Secret ns/github-secret not found")
    first = rules.plan(observed(ars(), github=Failed(error)))
    assert first.error is error
    assert conditions(first) == {"ScaleSetRegistered": ("False", "GitHubConfigError")}
    assert first.memory is not None
    again = rules.plan(observed(ars(), github=Failed(error), conditions=dict(first.memory)))
    assert again.error is error
    assert steps(again) == ["Settle InvalidName"]
    assert again.edits == {}


def test_a_condition_the_cache_does_not_show_yet_is_not_written_again() -> None:
    """The memory holds what this process wrote; a pass on an older cached set does not
    repeat it (nor its warning)."""
    obj = ars(spec__githubConfigSecret="../secret")
    first = rules.plan(observed(obj, github=None))
    assert conditions(first) == {"NamesValid": ("False", "InvalidName")}
    assert first.memory is not None
    again = rules.plan(observed(obj, github=None, conditions=dict(first.memory)))
    assert (again.steps, again.edits) == ((), {})


def test_a_fixed_name_turns_its_condition_true() -> None:
    obj = ars()
    obj["status"] = {
        "conditions": [{"type": "NamesValid", "status": "False", "reason": "InvalidName"}]
    }
    plan = rules.plan(converged(obj))
    assert conditions(plan) == {
        "NamesValid": ("True", "Valid"),
        "ScaleSetRegistered": ("True", "Registered"),
        "RunnersUpToDate": ("True", "UpToDate"),
    }
    written = plan.edits["status"]["conditions"][0]
    assert (written["lastTransitionTime"], written["observedGeneration"]) == (
        "2026-01-02T03:04:05Z",
        3,
    )


def test_a_set_running_says_its_scale_set_is_registered_and_its_runners_up_to_date() -> None:
    first = rules.plan(converged())
    assert conditions(first) == {
        "ScaleSetRegistered": ("True", "Registered"),
        "RunnersUpToDate": ("True", "UpToDate"),
    }
    assert first.memory is not None
    shown = ars(status={"conditions": list(first.memory.values())})
    again = rules.plan(replace(converged(), set=shown))
    assert (again.edits, again.memory) == ({}, None)


def test_the_status_counts_every_runner_set() -> None:
    now = _older_and_newer()
    counted = tuple(
        {**item, "status": {"currentReplicas": 2, "runningEphemeralRunners": 1}}
        for item in now.runner_sets
    )
    plan = rules.plan(replace(now, runner_sets=counted))
    [status] = [step for step in plan.steps if isinstance(step, rules.WriteStatus)]
    assert status.desired == {
        "phase": "Running",
        "currentRunners": 4,
        "pendingEphemeralRunners": 0,
        "runningEphemeralRunners": 2,
        "failedEphemeralRunners": 0,
    }


def test_a_converged_pass_has_nothing_to_say() -> None:
    assert rules.plan(converged()).describe() == ""


def test_every_decision_is_one_part_of_the_plans_line() -> None:
    plan = rules.plan(_outdated())
    assert plan.describe().split("; ") == [
        f"deleting AutoscalingListener {listener(ars())['metadata']['name']}",
        "runner image outdated: EphemeralRunnerSet arc held at 0",
    ]


HELM = {
    "actions.github.com/cleanup-manager-role-name": "arc-manager",
    "actions.github.com/cleanup-github-secret-name": "Not_A_Name",
}


@pytest.mark.parametrize(
    ("make", "expected", "requeue"),
    [
        pytest.param(
            lambda: observed(deleting(ars(metadata__finalizers=None))),
            [],
            None,
            id="no finalizer: nothing",
        ),
        pytest.param(
            lambda: replace(converged(), set=deleting(ars())),
            ["Delete AutoscalingListener arc-{hash}-listener"],
            rules.WAIT,
            id="the listener first",
        ),
        pytest.param(
            lambda: observed(deleting(ars()), listeners=(deleting(listener(ars())),)),
            [],
            rules.WAIT,
            id="the listener going: wait",
        ),
        pytest.param(
            lambda: observed(deleting(ars()), runner_sets=(runner_set(ars()),)),
            ["Delete EphemeralRunnerSet arc"],
            rules.WAIT,
            id="then the runner sets",
        ),
        pytest.param(
            lambda: observed(deleting(ars())),
            ["DeleteScaleSet 7 arc", "WriteSet", "RemoveFinalizer"],
            None,
            id="then the scale set and the finalizer",
        ),
        pytest.param(
            lambda: observed(
                deleting(
                    ars(
                        metadata__annotations={
                            **ars()["metadata"]["annotations"],
                            "actions.github.com/runner-scale-set-name": "Linux X64",
                        }
                    )
                )
            ),
            ["DeleteScaleSet 7 Linux X64", "WriteSet", "RemoveFinalizer"],
            None,
            id="the scale set named as GitHub has it",
        ),
        pytest.param(
            lambda: observed(
                deleting(ars(metadata__annotations={**ars()["metadata"]["annotations"], **HELM}))
            ),
            [
                "DeleteScaleSet 7 arc",
                "WriteSet",
                "Warn InvalidName",
                "StripCleanupProtection Role arc-manager",
                "RemoveFinalizer",
            ],
            None,
            id="Helm's objects released, a bad name left alone",
        ),
    ],
)
def test_a_deletion_takes_these_steps(
    make: Callable[[], Observed], expected: list[str], requeue: float | None
) -> None:
    plan = rules.plan(make())
    name = listener(ars())["metadata"]["name"]
    assert steps(plan) == [step.replace("arc-{hash}-listener", name) for step in expected]
    assert plan.requeue_after == requeue


@pytest.mark.parametrize(
    ("error", "left"),
    [
        (GitHubConfigError("GitHubConfigSecretNotFound", "secret github-secret not found"), True),
        (KubeNotFound('secrets "github-secret" not found', code=404), True),
        (ActionsServerError("service unavailable", status=503), False),
    ],
)
def test_a_scale_set_is_left_on_github_for_want_of_credentials_only(
    error: Exception, left: bool
) -> None:
    assert isinstance(error, rules.NO_CREDENTIALS) is left
    if left:
        message = rules.left_on_github(7, "Linux X64", error)
        assert message.startswith("scale set 7 ('Linux X64') could not be deleted on GitHub (")
        assert message.endswith("it stays registered there; delete it by hand")


def _relabelled() -> Observed:
    obj = ars()
    now = converged(obj)
    newer = copy.deepcopy(obj)
    newer["metadata"]["labels"] = {"team": "build"}
    return replace(now, set=newer)


@pytest.mark.parametrize(
    ("case", "make", "phase", "change_hash"),
    [
        ("converged: Running, the hash kept", converged, "Running", None),
        ("a new label: Pending, the hash recorded", _relabelled, "Pending", "new"),
        ("a new runner image: Pending", _with_new_image, "Pending", "new"),
        (
            "a new maxRunners: Pending while the listener is re-made",
            _with_max_runners,
            "Pending",
            None,
        ),
        (
            "no listener yet: Pending",
            lambda: observed(ars(), runner_sets=(runner_set(ars()),)),
            "Pending",
            None,
        ),
    ],
)
def test_the_phase_is_pending_from_a_change_until_the_listener_runs_with_it(
    case: str, make: Callable[[], Observed], phase: str, change_hash: str | None
) -> None:
    """ARC 0.14.2's rule (docs/autoscaling.md#phase): a new spec or new labels write
    `actions.github.com/change-hash` and `Pending`; `Running` once a pass finds the listener."""
    seen = make()
    plan = rules.plan(seen)
    [written] = [step.desired for step in plan.steps if isinstance(step, rules.WriteStatus)]
    assert written["phase"] == phase, case
    recorded = (
        (plan.edits.get("metadata") or {}).get("annotations", {}).get(rules.ANNOTATION_CHANGE_HASH)
    )
    assert recorded == (rules.change_hash(seen.set) if change_hash else None), case
