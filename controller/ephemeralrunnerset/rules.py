"""Pure decisions of the EphemeralRunnerSet reconciler: classification, scaling, victims, status,
and `plan`, the whole of one pass's decision, which the pass applies and the wake rules ask.

Implements ARC's classification, scaling and victim rules with the newer upstream ones
(docs/reconcilers.md#ephemeralrunnerset):

* `status.finishedRunnerCleanupPatchID`: finished runners are cleaned up in a pass of their own
  that records the patch id it served; a scale-up under that same non-zero patch id is suppressed,
  because the gap was made by the cleanup and not by new demand;
* runners being deleted count against the desired replicas (no replacement until they are gone);
* `actionableRevision`: runners are stamped with the revision they were built for; `Outdated`
  runners of an older revision are stale (deleted and replaced, the set does not turn Outdated);
* failed runners hold their slot only for a backoff, then are replaced
  (docs/reconcilers.md#failed-runners);
* a set no AutoscalingRunnerSet controls advances its own `actionableRevision` when its runner
  spec changes (docs/reconcilers.md#revisions).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum

from controller.runners.backoff import ReplacementPolicy
from controller.runners.busy import BUDGET_MIN_AVAILABLE, busy_selector
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH, is_own_digest, json_digest
from controller.runtime.controllerutil import has_any_finalizer
from controller.runtime.predicates import stable_metadata
from shared.api import EphemeralRunnerPhase, EphemeralRunnerSetPhase, patchid
from shared.api.names import (
    ANNOTATION_ACTIONABLE_REVISION,
    ANNOTATION_PATCH_ID,
    EPHEMERAL_RUNNER_SET_FINALIZERS,
    FINALIZER_EPHEMERAL_RUNNER_SET,
    KIND_AUTOSCALING_RUNNER_SET,
)
from shared.api.views import is_busy, last_failure, runner_id, runner_set_status
from shared.kube.views import (
    annotation_int,
    controller_owner,
    controller_owner_uid,
    created_at,
    is_deleting,
    metadata_of,
    parse_time,
    spec_int,
    status_int,
    status_of,
    uid_of,
)
from shared.typedefs import JSONDict

# This project's own bookkeeping: how many failed runners in a row this runner replaces.
FAILED_LINEAGE_ANNOTATION = "gha-runner-scaler/failed-runner-replacements"


@dataclass(slots=True)
class Children:
    """The runners of one set, bucketed as ARC does (docs/reconcilers.md#ephemeralrunnerset)
    plus `stale_outdated`. Each bucket is read by its length and by iterating it
    (`children.Runners`: a pass's view of the index's bucket, read only when iterated)."""

    pending: Collection[JSONDict] = field(default_factory=list)
    running: Collection[JSONDict] = field(default_factory=list)
    finished: Collection[JSONDict] = field(default_factory=list)
    failed: Collection[JSONDict] = field(default_factory=list)
    outdated: Collection[JSONDict] = field(default_factory=list)
    stale_outdated: Collection[JSONDict] = field(default_factory=list)
    deleting: Collection[JSONDict] = field(default_factory=list)
    latest_patch_id: int = 0
    idle: Collection[JSONDict] = field(default_factory=list)
    """The pending and running runners a scale-down may take (`is_idle`), also in their
    buckets: a scale-down reads these, not every live runner (in a jobs phase nearly all are
    busy)."""

    @property
    def scale_total(self) -> int:
        """Runners occupying a slot: failed ones do, until they are replaced."""
        return len(self.pending) + len(self.running) + len(self.failed)

    @property
    def terminated(self) -> list[JSONDict]:
        return [*self.finished, *self.failed, *self.outdated, *self.stale_outdated]

    @property
    def live(self) -> list[JSONDict]:
        """The pending and running runners."""
        return [*self.pending, *self.running]


# The buckets of `Children` a runner can be in by itself; `stale_outdated` is the part of
# `outdated` older than the set's applied revision, split off when a pass reads them.
PENDING, RUNNING, FINISHED, FAILED, OUTDATED, DELETING = (
    "pending",
    "running",
    "finished",
    "failed",
    "outdated",
    "deleting",
)
BUCKETS = (PENDING, RUNNING, FINISHED, FAILED, OUTDATED, DELETING)
STALE_OUTDATED = "stale_outdated"
IDLE = "idle"


def bucket_of(runner: JSONDict) -> str:
    """Which of `BUCKETS` a runner belongs in."""
    if is_deleting(runner):
        return DELETING
    phase = status_of(runner).get("phase")
    if phase == EphemeralRunnerPhase.RUNNING:
        return RUNNING
    if phase == EphemeralRunnerPhase.SUCCEEDED:
        return FINISHED
    if phase == EphemeralRunnerPhase.FAILED:
        return FAILED
    if phase == EphemeralRunnerPhase.OUTDATED:
        return OUTDATED
    return PENDING


def is_stale(runner: JSONDict, *, applied_revision: int) -> bool:
    """An `Outdated` runner built for a revision older than the set's applied one."""
    return (annotation_int(runner, ANNOTATION_ACTIONABLE_REVISION) or 0) < applied_revision


def patch_id_of(runner: JSONDict) -> int | None:
    return annotation_int(runner, ANNOTATION_PATCH_ID)


def is_idle(runner: JSONDict, bucket: str) -> bool:
    """A runner of `bucket` a scale-down may take: pending or running, never one with a job,
    never one the service does not know yet (runner id 0: removing an unregistered runner from
    the service is impossible, so deleting it could leave a registration behind)."""
    return bucket in (PENDING, RUNNING) and bool(runner_id(runner)) and not is_busy(runner)


def classify(runners: Iterable[JSONDict], *, applied_revision: int) -> Children:
    buckets: dict[str, list[JSONDict]] = {bucket: [] for bucket in (*BUCKETS, STALE_OUTDATED, IDLE)}
    latest = 0
    for runner in runners:
        patch_id = patch_id_of(runner)
        if patch_id is not None:
            latest = max(latest, patch_id)
        bucket = bucket_of(runner)
        if is_idle(runner, bucket):
            buckets[IDLE].append(runner)
        if bucket == OUTDATED and is_stale(runner, applied_revision=applied_revision):
            bucket = STALE_OUTDATED
        buckets[bucket].append(runner)
    return Children(**buckets, latest_patch_id=latest)


def failed_since(runner: JSONDict) -> datetime:
    last = last_failure(runner)
    if last is not None:
        return last
    return parse_time(created_at(runner))


def lineage(runner: JSONDict) -> int:
    return annotation_int(runner, FAILED_LINEAGE_ANNOTATION) or 0


def replacement_due(
    failed: Iterable[JSONDict], *, now: datetime, policy: ReplacementPolicy
) -> tuple[list[JSONDict], timedelta | None]:
    """The failed runners whose backoff has run out, and the wait until the next one is due."""
    due: list[JSONDict] = []
    wait: timedelta | None = None
    for runner in failed:
        at = failed_since(runner) + policy.delay(lineage(runner))
        if at <= now:
            due.append(runner)
        elif wait is None or at - now < wait:
            wait = at - now
    return due, wait


@dataclass(frozen=True, slots=True)
class ScalePlan:
    """What one scaling pass does.

    `cleanup_finished` set means: record `finishedRunnerCleanupPatchID = patch_id`, delete the
    finished runners, publish status and end the pass without scaling.
    """

    cleanup_finished: bool = False
    create: int = 0
    scale_down: int = 0
    suppressed_by_cleanup: bool = False
    held_by_namespace: bool = False
    """Runners were wanted, but the namespace refused a create lately: it is being deleted."""


def owner_max_runners(
    runner_set: JSONDict, scale_sets: Callable[[str, str], JSONDict | None]
) -> int | None:
    """The `maxRunners` of the AutoscalingRunnerSet that owns the set (`scale_sets` reads one
    by namespace and name from the cache), or None: no owner, another owner, or no bound."""
    owner = controller_owner(runner_set)
    if owner is None or owner.get("kind") != KIND_AUTOSCALING_RUNNER_SET:
        return None
    meta = metadata_of(runner_set)
    scale_set = scale_sets(str(meta.get("namespace", "")), str(owner.get("name", "")))
    if scale_set is None or metadata_of(scale_set).get("uid") != owner.get("uid"):
        return None
    bound = (scale_set.get("spec") or {}).get("maxRunners")
    return bound if isinstance(bound, int) and not isinstance(bound, bool) else None


def bounded_replicas(replicas: int, max_runners: int | None) -> int:
    """The replicas a set runs: what the listener wrote, at most its scale set's `maxRunners`
    (a listener's token may write any number: docs/security.md#identities)."""
    return replicas if max_runners is None else max(0, min(replicas, max_runners))


def plan_replacements(*, replicas: int, children: Children, due: int) -> int:
    """How many of `due` retiring failed runners get a successor: only while still wanted."""
    others = children.scale_total - due + len(children.deleting)
    return min(due, max(0, replicas - others))


def plan_scaling(
    *,
    replicas: int,
    patch_id: int,
    children: Children,
    cleanup_marker: int,
    retired_failed: int = 0,
    replacements: int = 0,
) -> ScalePlan | None:
    """The scaling decision of one pass, or None when this patch id was already served.

    `cleanup_marker` is `status.finishedRunnerCleanupPatchID` read past the cache.
    `retired_failed` failed runners are deleted in this pass (they become deleting runners) and
    `replacements` new runners take their slots.
    """
    if patchid.already_served(patch_id, latest_served=children.latest_patch_id):
        return None
    if children.finished:
        return ScalePlan(cleanup_finished=True)
    total = children.scale_total - retired_failed + replacements
    occupied = total + len(children.deleting) + retired_failed
    if occupied < replicas:
        if patchid.gap_is_cleanups(patch_id, cleanup_marker=cleanup_marker):
            return ScalePlan(suppressed_by_cleanup=True)
        return ScalePlan(create=replicas - occupied)
    if patchid.allows_scale_down(patch_id) and total > replicas:
        return ScalePlan(scale_down=total - replicas)
    return ScalePlan()


LISTENER_FIELDS = ("replicas", patchid.SPEC_FIELD)
"""The `spec` fields the listener's patch writes (with the scale set id, which it rewrites
unchanged)."""


def only_listener_fields_changed(old: JSONDict, new: JSONDict) -> bool:
    """Whether an update of a set changed its replicas or patch id and nothing else a pass reads
    (the generation moves with the spec)."""

    def rest(obj: JSONDict) -> JSONDict:
        meta = {k: v for k, v in stable_metadata(obj).items() if k != "generation"}
        spec = {k: v for k, v in (obj.get("spec") or {}).items() if k not in LISTENER_FIELDS}
        return {**obj, "metadata": meta, "spec": spec}

    return rest(old) == rest(new)


def _oldest_first(runners: Iterable[JSONDict]) -> list[JSONDict]:
    return sorted(runners, key=created_at)


def scale_down_candidates(children: Children) -> list[JSONDict]:
    """Victims in order: starting runners, idle ready ones, then `Running` ones without a job,
    each oldest first (upstream takes the pending ones, then the running ones), all of them
    `Children.idle` (`is_idle`). This project's listener writes `Running` together with the
    job, but a runner ARC made is `Running` as soon as its pod runs, busy or not: without a job
    it is idle.
    """
    pending = [r for r in children.idle if bucket_of(r) == PENDING]
    starting = [r for r in pending if not status_of(r).get("ready")]
    ready = [r for r in pending if status_of(r).get("ready")]
    idle_running = [r for r in children.idle if bucket_of(r) == RUNNING]
    return _oldest_first(starting) + _oldest_first(ready) + _oldest_first(idle_running)


def cleanup_candidates(children: Children) -> list[JSONDict]:
    """Live runners a cleanup (revision change, Outdated, deletion) removes: all but the busy."""
    return [r for r in children.live if not is_busy(r)]


def desired_phase(*, current: str, children: Children, revision_advanced: bool) -> str:
    """`Outdated` once a runner of the applied revision is outdated, until the revision moves."""
    if children.outdated:
        return EphemeralRunnerSetPhase.OUTDATED.value
    if current == EphemeralRunnerSetPhase.OUTDATED and not revision_advanced:
        return EphemeralRunnerSetPhase.OUTDATED.value
    return EphemeralRunnerSetPhase.RUNNING.value


def runner_spec_hash(runner_set: JSONDict) -> str:
    return json_digest((runner_set.get("spec") or {}).get("ephemeralRunnerSpec") or {})


@dataclass(frozen=True, slots=True)
class SpecRevision:
    """What a set without an AutoscalingRunnerSet writes about its runner spec: the spec's hash,
    and the `actionableRevision` to advance to (None: record the hash only)."""

    spec_hash: str
    revision: int | None = None


def track_runner_spec(runner_set: JSONDict, children: Children) -> SpecRevision | None:
    """Whether a change of the runner spec advances the set's revision; None: nothing to write.

    An AutoscalingRunnerSet advances the revision of the sets it controls, so those are left
    alone. The first hash seen is recorded without a revision (the runners present were built
    from some spec this process never saw), and so is one replacing a digest this controller did
    not write (a released ARC's, on a set kept after `migrate-from-arc`), and so is a change
    that comes with a revision not applied yet (whoever wrote both has said it). A change
    advances the revision only when it has something to replace, an idle runner, or an
    `Outdated` phase to leave; otherwise recording the hash is enough, so that a spec written
    before any runner exists (the listener writing the scale set id it found) costs no cleanup
    pass.
    """
    owner = controller_owner(runner_set)
    if owner is not None and owner.get("kind") == KIND_AUTOSCALING_RUNNER_SET:
        return None
    current = runner_spec_hash(runner_set)
    recorded = (metadata_of(runner_set).get("annotations") or {}).get(ANNOTATION_RUNNER_SPEC_HASH)
    if recorded == current:
        return None
    revision = spec_int(runner_set, "actionableRevision")
    applied = status_int(runner_set, "appliedActionableRevision")
    outdated = runner_set_status(runner_set).get("phase") == EphemeralRunnerSetPhase.OUTDATED
    replaces = cleanup_candidates(children) or children.outdated or outdated
    if recorded is None or not is_own_digest(recorded) or revision > applied or not replaces:
        return SpecRevision(current)
    return SpecRevision(current, max(revision, applied) + 1)


def counts_status(children: Children) -> JSONDict:
    return {
        "currentReplicas": children.scale_total,
        "pendingEphemeralRunners": len(children.pending),
        "runningEphemeralRunners": len(children.running),
        "failedEphemeralRunners": len(children.failed),
    }


# --- the plan of one pass ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observed:
    """What one pass over a set decides on: read by the reconciler from its caches and from what
    the process remembers of the set, nothing else."""

    runner_set: JSONDict
    children: Children
    """The set's runners at its applied revision, with what this process created and deleted
    that the cache does not show yet laid over them."""
    cleanup_marker: int
    """`finishedRunnerCleanupPatchID` as this process last wrote it, else as cached."""
    max_runners: int | None
    """The owning AutoscalingRunnerSet's `maxRunners` (None: no owner, no bound)."""
    now: datetime
    replacement: ReplacementPolicy
    advancing: Children | None = None
    """With a revision to apply, the runners classified at that revision."""
    creates_refused_at: datetime | None = None
    """When the namespace last refused a runner's create because it is being deleted (this
    process's memory of the set)."""
    budget: JSONDict | None = None
    """The cached PodDisruptionBudget named like the set, whoever made it."""
    protect_busy_pods: bool = False
    """Whether busy runners are kept off drains (docs/reconcilers.md#busy-pods)."""


NAMESPACE_REFUSAL_HOLD = timedelta(seconds=30)
"""How long after a namespace refused a create (it is being deleted) a set creates nothing: the
set's own deletion follows within it, and a create retried sooner is only refused again."""


def creates_held(refused_at: datetime | None, now: datetime) -> timedelta | None:
    """The time left of `NAMESPACE_REFUSAL_HOLD` after a refused create; None: creates go."""
    if refused_at is None:
        return None
    left = refused_at + NAMESPACE_REFUSAL_HOLD - now
    return left if left > timedelta(0) else None


class Finalizing(Enum):
    """What a pass over a set being deleted does."""

    NOTHING = "nothing"
    """Its finalizer is gone already."""
    CLEAN_UP = "clean up"
    """Runners are left: the terminated and idle ones go, busy ones finish."""
    RELEASE = "release"
    """No runner is left: the finalizer goes."""


class Budget(Enum):
    """What a pass does about the set's PodDisruptionBudget (docs/reconcilers.md#busy-pods)."""

    ENSURE = "ensure"
    """Create it, or correct a spec someone changed."""
    TAKEN = "taken"
    """An object of that name is not the set's: left alone, and said in a Warning Event."""


def budget_drift(budget: JSONDict, set_uid: str) -> list[str]:
    """The fields of the set's budget that differ from what the set needs: an integer
    `minAvailable` no set reaches (never `maxUnavailable` or a percentage, for which the
    disruption controller asks the pods' owner for a `scale` it does not have) over the set's
    busy runner pods."""
    spec = budget.get("spec") or {}
    drifted = []
    if spec.get("minAvailable") != BUDGET_MIN_AVAILABLE or "maxUnavailable" in spec:
        drifted.append("spec.minAvailable")
    if spec.get("selector") != {"matchLabels": busy_selector(set_uid)}:
        drifted.append("spec.selector")
    return drifted


def budget_step(observed: Observed) -> Budget | None:
    """The set's budget: made once, its spec kept; none when busy pods are not protected (a
    budget made before selects only pods labelled before, and goes with the set)."""
    if not observed.protect_busy_pods:
        return None
    set_uid = uid_of(observed.runner_set)
    budget = observed.budget
    if budget is None:
        return Budget.ENSURE
    if controller_owner_uid(budget) != set_uid:
        return Budget.TAKEN
    if is_deleting(budget):
        # The garbage collector's, or someone's delete: its delete event wakes the set.
        return None
    return Budget.ENSURE if budget_drift(budget, set_uid) else None


@dataclass(frozen=True, slots=True)
class Plan:
    """What one pass over a set does, in this order (docs/reconcilers.md#ephemeralrunnerset).

    A plan with `apply_revision` ends there: the pass applies the revision, then plans again on
    the set as it wrote it. One whose scaling cleans up finished runners is planned again after
    the cleanup too. Everything else is one plan, applied in order."""

    finalizing: Finalizing | None = None
    """Set only when the set is being deleted; nothing else is planned then."""
    spec_revision: SpecRevision | None = None
    add_finalizer: bool = False
    apply_revision: int | None = None
    revision_phase: str = ""
    """The phase written with the revision applied."""
    outdated: bool = False
    """Outdated: clean up only, no scaling."""
    stale: tuple[JSONDict, ...] = ()
    written_replicas: int = 0
    replicas: int = 0
    """What the listener wrote, at most `max_runners`."""
    max_runners: int | None = None
    patch_id: int = 0
    replace: tuple[JSONDict, ...] = ()
    """Failed runners whose backoff ran out: each goes, the first `replacements` replaced."""
    replacements: int = 0
    wait: timedelta | None = None
    """Until the next failed runner is due for replacement, or creates may go again."""
    scaling: ScalePlan | None = None
    """None: this patch id was served already."""
    phase: str = ""
    budget: Budget | None = None

    @property
    def above_max(self) -> bool:
        return self.replicas != self.written_replicas

    @property
    def acts(self) -> bool:
        """Whether the pass would write anything but the counts of its status: what a wake
        rule asks of the set after an event."""
        scaling = self.scaling
        return bool(
            self.finalizing is not None
            or self.spec_revision is not None
            or self.add_finalizer
            or self.budget is Budget.ENSURE
            or self.apply_revision is not None
            or self.outdated
            or self.stale
            or self.replace
            or (
                scaling is not None
                and (scaling.cleanup_finished or scaling.create or scaling.scale_down)
            )
        )

    def describe(self, children: Children) -> str:
        """The plan in one line (empty when it does nothing but its status)."""
        parts: list[str] = []
        if self.finalizing is Finalizing.CLEAN_UP:
            busy = sum(1 for r in children.live if is_busy(r))
            parts.append(f"being deleted: cleaning up its runners ({busy} busy finish their jobs)")
        elif self.finalizing is Finalizing.RELEASE:
            parts.append("being deleted, no runner left: removing the finalizer")
        if self.spec_revision is not None:
            parts.append(
                "runner spec changed: hash recorded"
                if self.spec_revision.revision is None
                else f"runner spec changed: actionableRevision {self.spec_revision.revision}"
            )
        if self.add_finalizer:
            parts.append("adding the finalizer")
        if self.budget is Budget.ENSURE:
            parts.append("ensuring the PodDisruptionBudget of its busy runners")
        elif self.budget is Budget.TAKEN:
            parts.append("its PodDisruptionBudget's name is taken by another object")
        if self.apply_revision is not None:
            parts.append(
                f"applying actionableRevision {self.apply_revision}: idle and terminated "
                "runners go, busy ones finish"
            )
        if self.outdated:
            parts.append("Outdated: cleaning up, no scaling")
        if self.stale:
            parts.append(f"deleting {len(self.stale)} stale Outdated runner(s)")
        if self.replace:
            parts.append(
                f"retiring {len(self.replace)} failed runner(s), {self.replacements} replaced"
            )
        scaling = self.scaling
        if scaling is not None:
            if scaling.cleanup_finished:
                parts.append(
                    f"cleaning up {len(children.finished)} finished runner(s) under patch id "
                    f"{self.patch_id}"
                )
            if scaling.held_by_namespace:
                parts.append(
                    f"no scale-up to {self.replicas}: the namespace is being deleted and "
                    "refuses new runners"
                )
            if scaling.suppressed_by_cleanup:
                parts.append(
                    f"no scale-up to {self.replicas} under patch id {self.patch_id}: the gap was "
                    "made by cleaning up finished runners, not by new demand"
                )
            if scaling.create:
                parts.append(
                    f"creating {scaling.create} runner(s) for replicas={self.replicas} "
                    f"patchID={self.patch_id}"
                )
            if scaling.scale_down:
                parts.append(
                    f"scaling down by {scaling.scale_down} idle runner(s) to "
                    f"replicas={self.replicas}"
                )
        return "; ".join(parts)


def plan(observed: Observed) -> Plan:
    """The decision of one pass over a set, in the order of the pass (the module docstring of
    reconciler.py); also what the wake rules ask (`Plan.acts`)."""
    obj, children = observed.runner_set, observed.children
    if is_deleting(obj):
        if not has_any_finalizer(obj, EPHEMERAL_RUNNER_SET_FINALIZERS):
            return Plan(finalizing=Finalizing.NOTHING)
        buckets = (
            children.pending,
            children.running,
            children.finished,
            children.failed,
            children.outdated,
            children.stale_outdated,
            children.deleting,
        )
        return Plan(finalizing=Finalizing.CLEAN_UP if any(buckets) else Finalizing.RELEASE)
    first = Plan(
        spec_revision=track_runner_spec(obj, children),
        add_finalizer=not has_any_finalizer(obj, [FINALIZER_EPHEMERAL_RUNNER_SET]),
        budget=budget_step(observed),
    )
    revision = spec_int(obj, "actionableRevision")
    current_phase = str(runner_set_status(obj).get("phase") or "")
    if revision > status_int(obj, "appliedActionableRevision"):
        return replace(
            first,
            apply_revision=revision,
            revision_phase=desired_phase(
                current=current_phase,
                children=observed.advancing or children,
                revision_advanced=True,
            ),
        )
    phase = desired_phase(current=current_phase, children=children, revision_advanced=False)
    if phase == EphemeralRunnerSetPhase.OUTDATED:
        return replace(first, outdated=True, phase=phase)
    written = spec_int(obj, "replicas")
    replicas = bounded_replicas(written, observed.max_runners)
    patch_id = spec_int(obj, patchid.SPEC_FIELD)
    due, wait = replacement_due(children.failed, now=observed.now, policy=observed.replacement)
    held = creates_held(observed.creates_refused_at, observed.now)
    replacements = (
        0 if held else plan_replacements(replicas=replicas, children=children, due=len(due))
    )
    scaling = plan_scaling(
        replicas=replicas,
        patch_id=patch_id,
        children=children,
        cleanup_marker=observed.cleanup_marker,
        retired_failed=len(due),
        replacements=replacements,
    )
    if held and scaling is not None and scaling.create:
        scaling = replace(scaling, create=0, held_by_namespace=True)
        wait = held if wait is None else min(wait, held)
    return replace(
        first,
        stale=tuple(children.stale_outdated),
        written_replicas=written,
        replicas=replicas,
        max_runners=observed.max_runners,
        patch_id=patch_id,
        replace=tuple(due),
        replacements=replacements,
        wait=wait,
        scaling=scaling,
        phase=phase,
    )
