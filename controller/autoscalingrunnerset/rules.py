"""Pure decisions of the AutoscalingRunnerSet reconciler: `plan(observed) -> Plan`, what a pass
does, in order, and why (docs/autoscaling.md#plan-then-apply).

Order of the decision (ARC's, with the choices of docs/autoscaling.md#where-this-differs-from-arc):

1. Deletion: delete the listener and wait, delete every runner set the set controls and wait
   (busy runners finish under their finalizers), delete the scale set on GitHub, strip ARC's
   `cleanup-protection` finalizer from the Helm-made objects the `cleanup-*` annotations name,
   drop the finalizer.
2. Finalizer; then a new spec or new labels: the new `actions.github.com/change-hash`, and
   `Pending` (docs/autoscaling.md#phase).
3. Names: a name the set gives that is not a Kubernetes name stops the pass.
4. Scale set: default `runnerScaleSetName`; refuse Azure Key Vault; else ask GitHub (find or
   register it, follow a change of runner group or name, check it still exists before a
   listener is made, or only check the config) and plan again with the answer.
5. Runner set, found by owner (a released ARC's `<set>-xxxxx` is adopted in place, older ones
   drained): create it at 0 replicas, or bring it up to date in place; a new runner spec
   advances `actionableRevision`.
6. Outdated: the listener stops and the runner set is held at 0 until the runner spec changes.
7. Listener: report ARC's listeners elsewhere, refuse an invalid scaling policy, create the
   listener, patch a new `listenerReplicas`, re-create it when the rest of what it runs with
   changed, delete the ones an earlier runner group or URL named; none under `docker run`.
8. Status: the counts of every runner set it controls, phase (`Pending` until a pass finds the
   listener made with what the set asks) and conditions.

No function here reads a clock or the network: `Observed` carries the time and GitHub's answer.
A pass plans twice when it asks GitHub: the first plan stops at the question, the second decides
with the answer. A plan that writes the set (finalizer, defaulted name, recorded scale set) or
gives the runner set a new revision stops after that write: its echo brings the next pass, which
plans again on what was written (the controller drops the echo of its status writes only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from controller.autoscalingrunnerset.objects import (
    ANNOTATION_LISTENER,
    LISTENER_DOCKER_RUN,
    LISTENER_REPLICAS,
    drifted,
    github_url_labels,
    new_listener,
    new_runner_set,
    only_listener_replicas_differ,
    runner_set_annotations,
    runner_set_labels,
    runner_spec,
    scaling_policy_problem,
)
from controller.github.clients import REASON_INVALID_NAME, GitHubConfigError
from controller.github.credentials import REASON_VAULT_NOT_SUPPORTED, vault_refusal
from controller.github.scalesets import ScaleSet
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH, is_own_digest, json_digest
from controller.runtime.plans import AddFinalizer, RemoveFinalizer, Settle, Warn
from controller.settings import AutoscalingSettings
from shared.actions.errors import ActionsError, InvalidArgument
from shared.api.kinds import AUTOSCALING_LISTENER, CLEANUP_TARGETS, EPHEMERAL_RUNNER_SET
from shared.api.names import (
    ANNOTATION_LISTENER_GROUP,
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    ANNOTATION_RUNNER_SET_NAME,
    FINALIZER_AUTOSCALING_RUNNER_SET,
)
from shared.api.references import (
    autoscaling_runner_set_name_problems,
    cleanup_annotation_problems,
)
from shared.kube.errors import Forbidden
from shared.kube.errors import NotFound as KubeNotFound
from shared.kube.objects import Kind
from shared.kube.views import (
    annotation_int,
    created_at,
    format_time,
    is_deleting,
    metadata_of,
    status_of,
)
from shared.typedefs import JSONDict

PHASE_PENDING, PHASE_RUNNING, PHASE_OUTDATED = "Pending", "Running", "Outdated"
ANNOTATION_CHANGE_HASH = "actions.github.com/change-hash"
"""ARC 0.14.2's record of the spec and labels seen (docs/autoscaling.md#phase)."""
CONDITION_SCALE_SET = "ScaleSetRegistered"
CONDITION_RUNNERS = "RunnersUpToDate"
CONDITION_POLICY = "ScalingPolicyValid"
CONDITION_LISTENER = "SingleListener"
CONDITION_NAMES = "NamesValid"
WAIT = 1.0
"""Seconds between looks at a child being deleted (its delete event usually comes first)."""
OUTDATED = (
    "the runner image is deprecated (runners exit with code 7); update the runner "
    "image in spec.template to resume"
)
# Warning reasons (Events) of the set.
WARN_REGISTRATION = "ScaleSetRegistrationFailed"
WARN_MISSING = "ScaleSetMissing"
WARN_LEFT_ON_GITHUB = "ScaleSetLeftOnGitHub"
WARN_OUTDATED = "RunnerOutdated"
WARN_POLICY = "InvalidScalingPolicy"
WARN_FOREIGN = "ForeignListener"
CLEANUP = "cleanup annotations"
"""The subject of the `InvalidName` warning about `cleanup-*` annotations on deletion."""


# --- what a pass observes ----------------------------------------------------------------------


class Ask(Enum):
    """The one GitHub call of a pass before it decides on the scale set."""

    CHECK = "check the GitHub config"
    VERIFY = "check the scale set still exists"
    REGISTER = "find or register the scale set"
    MOVE = "move the scale set to the runner group"
    RENAME = "rename the scale set"


@dataclass(frozen=True, slots=True)
class Checked:
    """GitHub answered: the config works (and the scale set exists, for `Ask.VERIFY`)."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """GitHub answered with the scale set found, registered, moved or renamed."""

    scale_set: ScaleSet


@dataclass(frozen=True, slots=True)
class Missing:
    """GitHub answered that the recorded scale set is gone (deleted behind our back)."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The call failed (GitHub, a Secret or the GitHub config): said, then raised for backoff."""

    error: Exception


Answer = Checked | Recorded | Missing | Failed


@dataclass(slots=True)
class SetMemory:
    """What this process remembers of one set (`Pass.memory`, forgotten with it): by condition
    type, the condition it last wrote, which a lagging cache may not show yet."""

    conditions: dict[str, JSONDict] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Observed:
    """What a pass decides on: the set and its children as the caches show them, what this
    process last wrote, the time, and GitHub's answer once it was asked."""

    set: JSONDict
    runner_sets: tuple[JSONDict, ...]
    """The EphemeralRunnerSets the set controls (by owner)."""
    listeners: tuple[JSONDict, ...]
    """Every AutoscalingListener whose spec names the set, in any namespace."""
    named_listener: JSONDict | None
    """The cache's listener of the name the set's listener has, in the controller namespace."""
    conditions: Mapping[str, JSONDict]
    """`SetMemory.conditions`."""
    settings: AutoscalingSettings
    now: datetime
    github: Answer | None = None


# --- what a pass does --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteSet:
    """Send the plan's `edits` of the set (those not sent yet)."""


@dataclass(frozen=True, slots=True)
class WriteStatus:
    """`Pass.write_status(desired)` with the plan's `edits`; the edits alone when it is not due."""

    desired: JSONDict


@dataclass(frozen=True, slots=True)
class Announce:
    """A Normal Event on the set."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Create:
    kind: Kind
    desired: JSONDict


@dataclass(frozen=True, slots=True)
class Delete:
    kind: Kind
    target: JSONDict


@dataclass(frozen=True, slots=True)
class UpdateRunnerSet:
    """One optimistic patch of the runner set: its computed labels and annotations merged,
    `spec` fields set (None removes one)."""

    target: JSONDict
    labels: JSONDict
    annotations: JSONDict
    spec: JSONDict


@dataclass(frozen=True, slots=True)
class Patch:
    """Set `spec` fields of a child in place (`Pass.ensure`, whose drift names each key of an
    object field that differs)."""

    kind: Kind
    target: JSONDict
    spec: JSONDict


@dataclass(frozen=True, slots=True)
class DeleteScaleSet:
    """Delete the scale set on GitHub. Without usable credentials (`NO_CREDENTIALS`) it is left
    there: warned of (`left_on_github`) and counted, not retried; other failures are retried."""

    scale_set_id: int
    name: str


@dataclass(frozen=True, slots=True)
class StripCleanupProtection:
    kind: Kind
    namespace: str
    name: str


Step = (
    AddFinalizer
    | RemoveFinalizer
    | WriteSet
    | WriteStatus
    | Warn
    | Settle
    | Announce
    | Create
    | Delete
    | UpdateRunnerSet
    | Patch
    | DeleteScaleSet
    | StripCleanupProtection
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a pass does, in order (`steps`), and why (`why`, one entry per decision: a pass
    that only waits or writes its status says nothing).

    `edits` is a merge into the set (annotations, labels, spec, `status.conditions`) that rides
    on the plan's first `WriteSet` or `WriteStatus`; `memory` is what `SetMemory.conditions` holds
    once that write is sent. A plan with `ask` stops there: the pass asks GitHub and plans again
    with the answer. `error` is raised once the steps are done (its backoff is the retry)."""

    steps: tuple[Step, ...] = ()
    why: tuple[str, ...] = ()
    edits: JSONDict = field(default_factory=dict)
    memory: Mapping[str, JSONDict] | None = None
    ask: Ask | None = None
    requeue_after: float | None = None
    error: Exception | None = None

    def describe(self) -> str:
        """One log line: every decision of the pass."""
        return "; ".join(self.why)


def reason_text(exc: BaseException) -> str:
    """One stable line for a condition and an Event: the service's own words without the
    request's ids (which change on every retry and would make every retry a new message)."""
    if isinstance(exc, ActionsError) and exc.status:
        detail = str(exc).split(f"{exc.type_name}: ", 1)[-1] if exc.type_name else ""
        return f"GitHub answered {exc.status}" + (f": {detail}" if detail else "")
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


NO_CREDENTIALS: tuple[type[Exception], ...] = (
    GitHubConfigError,
    InvalidArgument,
    KubeNotFound,
    Forbidden,
)
"""Why a scale set cannot be deleted for want of credentials: the GitHub config Secret is gone
(a namespace deletion removes it first), unreadable or unusable. Waiting cannot bring them back,
so the set goes without its scale set."""


def left_on_github(scale_set_id: int, name: str, exc: BaseException) -> str:
    return (
        f"scale set {scale_set_id} ({name!r}) could not be deleted on GitHub "
        f"({reason_text(exc)}): it stays registered there; delete it by hand"
    )


def change_hash(ars: JSONDict) -> str:
    """The digest of the set's spec and labels, as ARC's `Hash()` covers them: any change to
    either is a new `actions.github.com/change-hash` and a `Pending` phase."""
    return json_digest(
        {"spec": ars.get("spec") or {}, "labels": metadata_of(ars).get("labels") or {}}
    )


def wants_listener(ars: JSONDict) -> bool:
    annotations = metadata_of(ars).get("annotations") or {}
    return annotations.get(ANNOTATION_LISTENER) != LISTENER_DOCKER_RUN


def current_runner_set(ars: JSONDict, owned: Sequence[JSONDict]) -> JSONDict | None:
    """The set that holds the scale set's runners: the one recorded on the set, else the newest
    this set controls (ARC's rule: a released ARC names its sets `<set>-xxxxx`, and after a spec
    change the newest is the one in use). Found by owner, never by name."""
    live = [s for s in owned if not is_deleting(s)]
    recorded = (metadata_of(ars).get("annotations") or {}).get(ANNOTATION_RUNNER_SET_NAME)
    for runner_set in live:
        if metadata_of(runner_set)["name"] == recorded:
            return runner_set
    if not live:
        return None
    return max(live, key=lambda s: (created_at(s), metadata_of(s)["name"]))


def outdated(runner_set: JSONDict) -> bool:
    """The runner set found its current runner spec's image deprecated."""
    status = status_of(runner_set)
    applied = int(status.get("appliedActionableRevision") or 0)
    revision = int((runner_set.get("spec") or {}).get("actionableRevision") or 0)
    return status.get("phase") == PHASE_OUTDATED and applied == revision


def ask_of(ars: JSONDict, *, verify: bool) -> Ask:
    """Which GitHub call the set's recorded scale set needs."""
    spec = ars.get("spec") or {}
    annotations = metadata_of(ars).get("annotations") or {}
    scale_set_id = annotation_int(ars, ANNOTATION_RUNNER_SCALE_SET_ID)
    if not scale_set_id or scale_set_id <= 0:
        return Ask.REGISTER
    group = str(spec.get("runnerGroup") or "")
    have_group = annotations.get(ANNOTATION_RUNNER_GROUP_NAME)
    if have_group is None or (group and group.lower() != have_group.lower()):
        return Ask.MOVE
    name = str(spec.get("runnerScaleSetName") or "")
    if name.lower() != str(annotations.get(ANNOTATION_RUNNER_SCALE_SET_NAME, "")).lower():
        return Ask.RENAME
    return Ask.VERIFY if verify else Ask.CHECK


class _Planner:
    """The plan being built: steps, reasons, the set's edits and its conditions."""

    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self.ars = observed.set
        self.meta = metadata_of(self.ars)
        self.steps: list[Step] = []
        self.why: list[str] = []
        self.edits: JSONDict = {}
        self.mine = dict(observed.conditions)
        self.conditions_changed = False
        self.changed = False
        """The set's spec or labels changed since the last pass (`ANNOTATION_CHANGE_HASH`)."""
        self.listener_current = True
        """The listener runs with what the set asks (none is asked under `docker run`)."""

    def do(self, *steps: Step) -> None:
        self.steps.extend(steps)

    def say(self, why: str) -> None:
        self.why.append(why)

    def annotate(self, values: Mapping[str, object]) -> None:
        self.edits.setdefault("metadata", {}).setdefault("annotations", {}).update(values)

    def condition(self, kind: str, status: str, reason: str, message: str) -> bool:
        """Set a condition with the plan's next write of the set; whether it changed (a warning
        goes with a change only, not with every retry). What this process last wrote counts
        too: the cache may not show it yet."""
        cached = status_of(self.ars).get("conditions") or []
        have = self.mine.get(kind) or next((c for c in cached if c.get("type") == kind), None)
        if have is not None and (have.get("status"), have.get("reason"), have.get("message")) == (
            status,
            reason,
            message,
        ):
            self.mine[kind] = have
            return False
        self.mine[kind] = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_time(self.observed.now),
            "observedGeneration": int(self.meta.get("generation") or 0),
        }
        self.conditions_changed = True
        return True

    def clear_condition(self, kind: str, reason: str, *settled: str) -> None:
        """The condition turns True where the set shows one; each warning reason ends."""
        self.do(*(Settle(warning) for warning in settled))
        cached = status_of(self.ars).get("conditions") or []
        if any(condition.get("type") == kind for condition in cached):
            self.condition(kind, "True", reason, "")

    def refuse(self, kind: str, reason: str, message: str, warning: str) -> None:
        """The condition False; a warning when it changed."""
        if self.condition(kind, "False", reason, message):
            self.do(Warn(warning, message))

    def plan(
        self,
        *,
        ask: Ask | None = None,
        requeue_after: float | None = None,
        error: Exception | None = None,
    ) -> Plan:
        if self.changed and not any(isinstance(step, WriteStatus) for step in self.steps):
            # A plan that stops early (a write whose echo continues) still says `Pending`.
            self.do(WriteStatus({"phase": PHASE_PENDING}))
        edits = self.edits
        if self.conditions_changed:
            # The whole list is written: each condition as this process last wrote it, not as
            # a cache that has not shown that write yet has it.
            cached = status_of(self.ars).get("conditions") or []
            types = [c.get("type") for c in cached]
            conditions = [self.mine.get(str(c.get("type")), c) for c in cached]
            conditions += [entry for type_, entry in self.mine.items() if type_ not in types]
            edits = {**edits, "status": {"conditions": conditions}}
        return Plan(
            steps=tuple(self.steps),
            why=tuple(self.why),
            edits=edits,
            memory=self.mine if self.conditions_changed else None,
            ask=ask,
            requeue_after=requeue_after,
            error=error,
        )


def plan(observed: Observed) -> Plan:
    """What a pass over `observed` does (the module docstring's order)."""
    p = _Planner(observed)
    if is_deleting(observed.set):
        return _finalize(p)
    finalizers = p.meta.get("finalizers") or []
    if FINALIZER_AUTOSCALING_RUNNER_SET not in finalizers:
        p.say("adding the finalizer")
        p.do(AddFinalizer())
        return p.plan()
    target = change_hash(observed.set)
    if (p.meta.get("annotations") or {}).get(ANNOTATION_CHANGE_HASH) != target:
        p.say("spec or labels changed: Pending until the listener runs with them")
        p.annotate({ANNOTATION_CHANGE_HASH: target})
        p.changed = True
    problems = autoscaling_runner_set_name_problems(observed.set)
    if problems:
        # Nothing is read or made by a name that is not one; what the set has keeps running.
        message = "; ".join(problems)
        if p.condition(CONDITION_NAMES, "False", REASON_INVALID_NAME, message):
            p.say("names refused: nothing is read or made by them")
            p.do(Warn(REASON_INVALID_NAME, message), WriteSet())
        return p.plan()
    p.clear_condition(CONDITION_NAMES, "Valid", REASON_INVALID_NAME)
    scale_set = _scale_set(p)
    if isinstance(scale_set, Ask):
        # The pass asks GitHub and plans again with the answer (`Observed.github`).
        return Plan(ask=scale_set)
    if scale_set is None:
        answer = observed.github
        return p.plan(error=answer.error if isinstance(answer, Failed) else None)
    return _runner_set(p, scale_set)


def _ask(p: _Planner) -> Ask:
    ars = p.observed.set
    # The scale set is looked up on GitHub only when a listener is about to be made: a listener
    # whose scale set was deleted there fails, and its re-creation comes here.
    verify = p.observed.named_listener is None and wants_listener(ars)
    return ask_of(ars, verify=verify)


def _scale_set(p: _Planner) -> int | Ask | None:
    """The registered scale set's id; the question for GitHub when it was not asked yet; None
    when the pass stops here (a write whose echo brings the next pass, or a refusal)."""
    ars = p.observed.set
    spec = ars.get("spec") or {}
    if not spec.get("runnerScaleSetName"):
        p.say(f"runnerScaleSetName defaulted to {p.meta['name']}")
        p.edits.setdefault("spec", {})["runnerScaleSetName"] = p.meta["name"]
        p.do(WriteSet())
        return None
    if refusal := vault_refusal(spec):
        if p.condition(CONDITION_SCALE_SET, "False", REASON_VAULT_NOT_SUPPORTED, refusal):
            p.say("Azure Key Vault credentials refused")
            p.do(Warn(REASON_VAULT_NOT_SUPPORTED, refusal), WriteSet())
        return None
    answer = p.observed.github
    scale_set_id = annotation_int(ars, ANNOTATION_RUNNER_SCALE_SET_ID) or 0
    match answer:
        case None:
            return _ask(p)
        case Recorded(scale_set):
            p.say(
                f"scale set {scale_set.id} recorded: name {scale_set.name!r}, "
                f"runner group {scale_set.runner_group_name!r}"
            )
            p.annotate(
                {
                    ANNOTATION_RUNNER_SCALE_SET_ID: str(scale_set.id),
                    ANNOTATION_RUNNER_SCALE_SET_NAME: scale_set.name,
                    ANNOTATION_RUNNER_GROUP_NAME: scale_set.runner_group_name,
                }
            )
            url = str(spec.get("githubConfigUrl", ""))
            p.edits["metadata"].setdefault("labels", {}).update(github_url_labels(url))
            p.do(WriteSet())
            return None
        case Missing():
            p.say(f"scale set {scale_set_id} is gone on GitHub: registering it again")
            p.annotate({ANNOTATION_RUNNER_SCALE_SET_ID: None})
            message = f"scale set {scale_set_id} is gone on GitHub; registering it again"
            p.do(Warn(WARN_MISSING, message), WriteSet())
            return None
        case Failed(error):
            text = reason_text(error)
            if p.condition(CONDITION_SCALE_SET, "False", type(error).__name__, text):
                p.say(f"scale set not registered: {text}")
                p.do(Warn(WARN_REGISTRATION, text), WriteSet())
            return None
    p.do(Settle(REASON_VAULT_NOT_SUPPORTED), Settle(WARN_REGISTRATION))
    p.condition(CONDITION_SCALE_SET, "True", "Registered", "")
    return scale_set_id


def _runner_set(p: _Planner, scale_set_id: int) -> Plan:
    ars, settings = p.observed.set, p.observed.settings
    owned = p.observed.runner_sets
    runner_set = current_runner_set(ars, owned)
    if runner_set is None:
        if owned:
            # The last one is being deleted (busy runners finish under its finalizer): never two
            # sets holding replicas for one scale set.
            return p.plan(requeue_after=WAIT)
        p.say(f"creating the EphemeralRunnerSet for scale set {scale_set_id}")
        desired = new_runner_set(
            ars, scale_set_id=scale_set_id, excluded_prefixes=settings.excluded_label_prefixes
        )
        p.do(Create(EPHEMERAL_RUNNER_SET, desired))
        return p.plan()
    keep = metadata_of(runner_set)["name"]
    for other in owned:
        name = metadata_of(other)["name"]
        if other is runner_set or is_deleting(other):
            continue
        # Its idle runners go at once, its busy ones finish their jobs under its finalizer, as
        # ARC's `eventual` update drains them.
        p.say(f"deleting EphemeralRunnerSet {name}, older than {keep} (busy runners finish first)")
        p.do(
            Announce(
                "RunnerSetDrained",
                f"EphemeralRunnerSet {name} is older than {keep}: deleted, its busy runners "
                "finish first",
            ),
            Delete(EPHEMERAL_RUNNER_SET, other),
        )
    _record_runner_set(p, keep)
    update, spec_changed = _update_runner_set(p, runner_set, scale_set_id)
    if update is not None:
        p.do(update)
    if spec_changed:
        # The runner set's echo brings the next pass, which goes on from here.
        return p.plan()
    if outdated(runner_set):
        return _hold_outdated(p, runner_set)
    _foreign_listeners(p)
    if wants_listener(ars):
        problem = scaling_policy_problem(ars)
        if problem is not None:
            # The listener it has keeps running on its config; none is made with this one.
            if p.condition(CONDITION_POLICY, "False", WARN_POLICY, problem):
                p.say("scaling policy refused: the listener is left as it is")
                p.do(Warn(WARN_POLICY, problem))
            return _status(p, PHASE_RUNNING)
        p.clear_condition(CONDITION_POLICY, "Valid", WARN_POLICY)
    _listener(p, scale_set_id, keep)
    return _status(p, PHASE_RUNNING)


def _record_runner_set(p: _Planner, name: str) -> None:
    """Record a set not named like this one (adopted from ARC) on it, with the pass's next write,
    so that the choice stays put and a person sees which set is in use."""
    annotations = p.meta.get("annotations") or {}
    if name == p.meta["name"] and ANNOTATION_RUNNER_SET_NAME not in annotations:
        return
    if annotations.get(ANNOTATION_RUNNER_SET_NAME) != name:
        p.say(f"EphemeralRunnerSet {name} recorded as the one in use")
        p.annotate({ANNOTATION_RUNNER_SET_NAME: name})


def _update_runner_set(
    p: _Planner, runner_set: JSONDict, scale_set_id: int
) -> tuple[UpdateRunnerSet | None, bool]:
    """The patch bringing the set's computed labels, annotations, runner metadata and runner
    spec up to date, if any; whether the runner spec changed (its revision advances)."""
    ars, settings = p.observed.set, p.observed.settings
    meta = metadata_of(runner_set)
    spec = runner_set.get("spec") or {}
    labels = drifted(
        meta.get("labels"),
        runner_set_labels(ars, excluded_prefixes=settings.excluded_label_prefixes),
    )
    annotations = drifted(meta.get("annotations"), runner_set_annotations(ars))
    desired_runner_spec = runner_spec(ars, scale_set_id=scale_set_id)
    digest = json_digest(desired_runner_spec)
    recorded = (meta.get("annotations") or {}).get(ANNOTATION_RUNNER_SPEC_HASH)
    if recorded != digest and not is_own_digest(recorded):
        # Released ARC's digest (a set adopted from ARC): it says nothing about the spec this
        # controller builds, so it is replaced without taking it as a change; the runners, idle
        # ones included, stay (docs/install.md#keeping-arcs-helm-release).
        p.say(
            f"adopting EphemeralRunnerSet {meta['name']} with its runners (runner-spec-hash "
            f"{recorded!r} was not written by this controller)"
        )
        return UpdateRunnerSet(
            runner_set,
            labels={},
            annotations={ANNOTATION_RUNNER_SPEC_HASH: digest},
            spec={"ephemeralRunnerSpec": desired_runner_spec},
        ), True
    spec_changed = recorded != digest
    runner_metadata = (ars.get("spec") or {}).get("ephemeralRunnerMetadata")
    metadata_changed = spec.get("ephemeralRunnerMetadata") != runner_metadata
    if not (labels or annotations or spec_changed or metadata_changed):
        return None, False
    fields: JSONDict = {}
    if metadata_changed:
        fields["ephemeralRunnerMetadata"] = runner_metadata
    if spec_changed:
        annotations = {**annotations, ANNOTATION_RUNNER_SPEC_HASH: digest}
        fields["ephemeralRunnerSpec"] = desired_runner_spec
        fields["actionableRevision"] = int(spec.get("actionableRevision") or 0) + 1
        p.say(
            f"runner spec of EphemeralRunnerSet {meta['name']} changed: revision "
            f"{fields['actionableRevision']}"
        )
    else:
        changed = [
            part
            for part, differs in (
                ("labels", labels),
                ("annotations", annotations),
                ("runner metadata", metadata_changed),
            )
            if differs
        ]
        p.say(f"EphemeralRunnerSet {meta['name']}: {', '.join(changed)} brought up to date")
    return UpdateRunnerSet(
        runner_set, labels=labels, annotations=annotations, spec=fields
    ), spec_changed


def _hold_outdated(p: _Planner, runner_set: JSONDict) -> Plan:
    """Upstream's later rule: stop, hold the runner set at 0, stay until the spec changes."""
    name = metadata_of(runner_set)["name"]
    _delete_listeners(p, keep=None)
    spec = runner_set.get("spec") or {}
    if spec.get("replicas") or spec.get("patchID"):
        p.say(f"runner image outdated: EphemeralRunnerSet {name} held at 0")
        p.do(Patch(EPHEMERAL_RUNNER_SET, runner_set, {"replicas": 0, "patchID": 0}))
    p.refuse(CONDITION_RUNNERS, WARN_OUTDATED, OUTDATED, WARN_OUTDATED)
    return _status(p, PHASE_OUTDATED)


def _own_listeners(p: _Planner) -> list[JSONDict]:
    namespace = p.observed.settings.controller_namespace
    return [
        listener
        for listener in p.observed.listeners
        if metadata_of(listener)["namespace"] == namespace
    ]


def _foreign_listeners(p: _Planner) -> None:
    """ARC's AutoscalingListener for this set, left in ARC's namespace (`arc-systems`), keeps a
    pod holding the scale set's message session. This controller may not delete in that
    namespace, so it says so: condition `SingleListener=False` and a warning naming it
    (docs/install.md#keeping-arcs-helm-release); the condition turns True once it is gone."""
    namespace = p.observed.settings.controller_namespace
    foreign = sorted(
        f"{metadata_of(listener)['namespace']}/{metadata_of(listener)['name']}"
        for listener in p.observed.listeners
        if metadata_of(listener)["namespace"] != namespace
    )
    if not foreign:
        p.clear_condition(CONDITION_LISTENER, "Single", WARN_FOREIGN)
        return
    message = (
        f"AutoscalingListener {', '.join(foreign)} (ARC's) names this set and its pod may "
        "hold the scale set's message session: stop ARC's controller and run "
        "`gha-controller migrate-from-arc --keep-helm-release --apply`"
    )
    if p.condition(CONDITION_LISTENER, "False", WARN_FOREIGN, message):
        p.say("ARC's listener found: " + ", ".join(foreign))
        p.do(Warn(WARN_FOREIGN, message))


def _delete_listeners(p: _Planner, *, keep: str | None) -> bool:
    """Delete the set's listeners but `keep`; whether any of them still exists."""
    left = False
    for listener in _own_listeners(p):
        name = metadata_of(listener)["name"]
        if name == keep:
            continue
        left = True
        if not is_deleting(listener):
            p.say(f"deleting AutoscalingListener {name}")
            p.do(Delete(AUTOSCALING_LISTENER, listener))
    return left


def _listener(p: _Planner, scale_set_id: int, runner_set: str) -> None:
    ars, settings = p.observed.set, p.observed.settings
    if not wants_listener(ars):
        _delete_listeners(p, keep=None)
        return
    desired = new_listener(
        ars,
        namespace=settings.controller_namespace,
        scale_set_id=scale_set_id,
        runner_set=runner_set,
        image=settings.listener_image,
        image_pull_secrets=settings.image_pull_secrets,
        excluded_prefixes=settings.excluded_label_prefixes,
    )
    name = desired["metadata"]["name"]
    _delete_listeners(p, keep=name)
    current = p.observed.named_listener
    if current is None:
        p.say(f"creating AutoscalingListener {name}")
        p.do(Create(AUTOSCALING_LISTENER, desired))
        p.listener_current = False
        return
    if is_deleting(current):
        p.listener_current = False
        return
    meta = metadata_of(current)
    metadata_drifted = (
        drifted(meta.get("labels"), desired["metadata"]["labels"])
        or drifted(meta.get("annotations"), desired["metadata"]["annotations"])
        # Leaving a listener group takes the annotation away.
        or (meta.get("annotations") or {}).keys() & {ANNOTATION_LISTENER_GROUP}
        != desired["metadata"]["annotations"].keys() & {ANNOTATION_LISTENER_GROUP}
    )
    if not metadata_drifted and only_listener_replicas_differ(
        current.get("spec") or {}, desired["spec"]
    ):
        replicas = desired["spec"].get(LISTENER_REPLICAS)
        p.say(f"AutoscalingListener {name} scaled to {replicas}")
        p.do(Patch(AUTOSCALING_LISTENER, current, {LISTENER_REPLICAS: replicas}))
        return
    if current.get("spec") != desired["spec"] or metadata_drifted:
        # A listener runs with what it was made with: re-create it (its delete event brings the
        # next pass, which makes the new one).
        p.say(f"re-creating AutoscalingListener {name}: what it runs with changed")
        p.do(Delete(AUTOSCALING_LISTENER, current))
        p.listener_current = False


def _status(p: _Planner, phase: str) -> Plan:
    """Phase and the counts of every runner of the scale set: those of each set this one
    controls, a set being drained included (ARC counts only its newest)."""
    owned = p.observed.runner_sets

    def total(field: str) -> int:
        return sum(int(status_of(s).get(field) or 0) for s in owned)

    if phase == PHASE_RUNNING:
        p.do(Settle(WARN_OUTDATED))
        p.condition(CONDITION_RUNNERS, "True", "UpToDate", "")
        if p.changed or not p.listener_current:
            # ARC's rule: `Pending` from a change of spec or labels until a pass finds the
            # listener made with it.
            phase = PHASE_PENDING
    p.do(
        WriteStatus(
            {
                "phase": phase,
                "currentRunners": total("currentReplicas"),
                "pendingEphemeralRunners": total("pendingEphemeralRunners"),
                "runningEphemeralRunners": total("runningEphemeralRunners"),
                "failedEphemeralRunners": total("failedEphemeralRunners"),
            }
        )
    )
    return p.plan()


def _finalize(p: _Planner) -> Plan:
    if FINALIZER_AUTOSCALING_RUNNER_SET not in (p.meta.get("finalizers") or []):
        return p.plan()
    if _delete_listeners(p, keep=None):
        return p.plan(requeue_after=WAIT)
    owned = p.observed.runner_sets
    if owned:
        # Every set it controls, an adopted or drained one of ARC's included; the scale set on
        # GitHub goes only once no runner of it is left.
        for runner_set in owned:
            if not is_deleting(runner_set):
                name = metadata_of(runner_set)["name"]
                p.say(f"deleting EphemeralRunnerSet {name} (busy runners finish first)")
                p.do(Delete(EPHEMERAL_RUNNER_SET, runner_set))
        return p.plan(requeue_after=WAIT)
    scale_set_id = annotation_int(p.observed.set, ANNOTATION_RUNNER_SCALE_SET_ID)
    if scale_set_id and scale_set_id > 0:
        annotations = p.meta.get("annotations") or {}
        name = str(
            annotations.get(ANNOTATION_RUNNER_SCALE_SET_NAME)
            or (p.observed.set.get("spec") or {}).get("runnerScaleSetName")
            or p.meta["name"]
        )
        p.say(f"deleting scale set {scale_set_id} on GitHub")
        p.annotate({ANNOTATION_RUNNER_SCALE_SET_ID: None})
        p.do(DeleteScaleSet(scale_set_id, name), WriteSet())
    annotations = p.meta.get("annotations") or {}
    refused = cleanup_annotation_problems(annotations)
    if refused:
        # ARC's Helm objects are named by these; one that is not a name is left alone, and the
        # set still goes.
        p.do(Warn(REASON_INVALID_NAME, "; ".join(refused) + ": left alone", CLEANUP))
    for annotation, kind in CLEANUP_TARGETS:
        named = annotations.get(annotation)
        if named and not cleanup_annotation_problems({annotation: named}):
            # Always the set's own namespace (ARC's rule).
            p.do(StripCleanupProtection(kind, p.meta["namespace"], named))
    p.say("removing the finalizer")
    p.do(RemoveFinalizer())
    return p.plan()
