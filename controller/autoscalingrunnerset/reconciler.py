"""The AutoscalingRunnerSet reconciler: a scale set on GitHub, its EphemeralRunnerSet, and its
listener (docs/autoscaling.md).

Order of a pass (ARC's, with the decisions of docs/autoscaling.md#where-this-differs-from-arc):

1. Read the set from the cache; gone ends the pass.
2. Deletion branch: delete the listener and wait, delete every runner set it controls and wait
   (busy runners finish under their finalizers), delete the scale set on GitHub, strip ARC's
   `cleanup-protection` finalizer from the Helm-made objects the `cleanup-*` annotations name,
   drop the finalizer.
3. Finalizer.
4. Scale set: find or register it (persisting `runnerScaleSetName`), then follow a change of
   runner group or name on GitHub in place.
5. Runner set, found by owner (a released ARC's `<set>-xxxxx` is adopted in place, older ones
   drained): create it at 0 replicas, or bring it up to date in place; a new runner spec
   advances `actionableRevision` (the runner set replaces idle runners, busy ones finish).
6. Outdated: the runner set reports its applied revision outdated; the set goes `Outdated`, the
   listener stops and the runner set is held at 0 until the runner spec changes.
7. Listener: create it, re-create it when what it runs with changed (a new `listenerReplicas`
   alone is patched in place), delete listeners an earlier runner group or URL named; none when
   the listener runs under `docker run`.
8. Status: the counts of every runner set it controls, phase `Running`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from controller.autoscalingrunnerset.objects import (
    ANNOTATION_LISTENER,
    LISTENER_DOCKER_RUN,
    LISTENER_REPLICAS,
    drifted,
    github_url_labels,
    listener_name,
    new_listener,
    new_runner_set,
    only_listener_replicas_differ,
    runner_set_annotations,
    runner_set_labels,
    runner_spec,
    scaling_policy_problem,
)
from controller.autoscalingrunnerset.predicates import ERS_COUNTS, ERS_TO_ARS
from controller.deps import Deps
from controller.github.clients import REASON_INVALID_NAME, ActionsClients, GitHubConfigError
from controller.github.scalesets import ScaleSet, ScaleSets
from controller.runners.objects import ANNOTATION_RUNNER_SPEC_HASH, is_own_digest, json_digest
from controller.runtime import (
    Controller,
    EventRecorder,
    Expectations,
    LazyObject,
    Manager,
    Owns,
    OwnWrite,
    Pass,
    Passes,
    Request,
    Result,
    Store,
    Watches,
    add_finalizers,
    has_any_finalizer,
    remove_finalizers,
)
from controller.settings import AutoscalingSettings
from shared.actions.errors import ActionsError, InvalidArgument, ScaleSetNotFound
from shared.api.kinds import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    CLEANUP_TARGETS,
    EPHEMERAL_RUNNER_SET,
)
from shared.api.names import (
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_RUNNER_SCALE_SET_ID,
    ANNOTATION_RUNNER_SCALE_SET_NAME,
    ANNOTATION_RUNNER_SET_NAME,
    FINALIZER_AUTOSCALING_RUNNER_SET,
    FINALIZER_CLEANUP_PROTECTION,
)
from shared.api.references import (
    autoscaling_runner_set_name_problems,
    cleanup_annotation_problems,
)
from shared.kube.errors import Forbidden, KubeError, NotFound
from shared.kube.objects import Kind, Objects
from shared.kube.views import annotation_int, created_at, is_deleting, metadata_of, status_of
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

PHASE_PENDING, PHASE_RUNNING, PHASE_OUTDATED = "Pending", "Running", "Outdated"
CONDITION_SCALE_SET = "ScaleSetRegistered"
CONDITION_RUNNERS = "RunnersUpToDate"
CONDITION_POLICY = "ScalingPolicyValid"
CONDITION_LISTENER = "SingleListener"
CONDITION_NAMES = "NamesValid"
WAIT = 1.0
"""Seconds between looks at a child being deleted (its delete event usually comes first)."""
VAULT = (
    "Azure Key Vault credentials (spec.vaultConfig) are not supported: put the GitHub PAT or App "
    "in a Secret named by spec.githubConfigSecret and remove spec.vaultConfig"
)


def _listener_key(listener: JSONDict) -> Iterable[Request]:
    spec = listener.get("spec") or {}
    namespace, name = (
        spec.get("autoscalingRunnerSetNamespace"),
        spec.get("autoscalingRunnerSetName"),
    )
    return (Request(str(namespace), str(name)),) if namespace and name else ()


class AutoscalingRunnerSetReconciler:
    def __init__(
        self,
        *,
        sets: Store,
        runner_sets: Store,
        listeners: Store,
        objects: Objects,
        clients: ActionsClients,
        events: EventRecorder,
        settings: AutoscalingSettings,
        expectations: Expectations,
    ) -> None:
        self._sets = sets
        self._runner_sets = runner_sets
        self._listeners = listeners
        self._objects = objects
        self._scale_sets = ScaleSets(clients)
        self._events = events
        self._settings = settings
        # Status values this process wrote and the cache does not show yet: a pass that reads
        # the older set does not write them again.
        self._passes = Passes(
            kind=AUTOSCALING_RUNNER_SET,
            store=sets,
            expectations=expectations,
            objects=objects,
            logger=log,
        )
        # By set uid and condition type, the condition this process last wrote.
        self._conditions: dict[str, dict[str, JSONDict]] = {}

    async def reconcile(self, request: Request) -> Result:
        p = self._passes.begin(request)
        if p is None:
            return Result()
        ars, cached = p.lazy, p.object
        if is_deleting(cached):
            return await self._finalize(p)
        if await add_finalizers(ars, self._objects, [FINALIZER_AUTOSCALING_RUNNER_SET]):
            p.log.info("finalizer added")
            return Result()
        if await self._names_refused(p):
            # Nothing is read or made by a name that is not one; what the set has keeps running.
            return Result()

        # The scale set is looked up on GitHub only when a listener is about to be made: a
        # listener whose scale set was deleted there fails, and its re-creation comes here.
        verify = self._listeners.get(
            self._settings.controller_namespace, listener_name(cached)
        ) is None and self._wants_listener(cached)
        scale_set_id = await self._ensure_scale_set(ars, verify=verify)
        if scale_set_id is None:
            return Result()

        owned = self._runner_sets.owned_by(p.uid)
        runner_set = self._current_runner_set(cached, owned)
        if runner_set is None:
            if owned:
                # The last one is being deleted (busy runners finish under its finalizer):
                # never two sets holding replicas for one scale set.
                return Result(requeue_after=WAIT)
            await self._objects.create(
                EPHEMERAL_RUNNER_SET,
                request.namespace,
                new_runner_set(
                    ars.object,
                    scale_set_id=scale_set_id,
                    excluded_prefixes=self._settings.excluded_label_prefixes,
                ),
            )
            p.log.info("EphemeralRunnerSet created for scale set %d", scale_set_id)
            return Result()
        await self._drain_others(p, owned, keep=runner_set)
        self._record_runner_set(ars, runner_set)
        spec_changed = await self._update_runner_set(ars.object, runner_set, scale_set_id)
        if spec_changed:
            return Result()

        if self._outdated(runner_set):
            return await self._hold_outdated(p, runner_set, owned)

        await self._report_foreign_listeners(p)
        if await self._policy_refused(ars):
            # The listener it has keeps running on its config; none is made with this one.
            await self._write_status(p, owned, phase=PHASE_RUNNING)
            return Result()
        await self._ensure_listener(p, scale_set_id, metadata_of(runner_set)["name"])
        await self._write_status(p, owned, phase=PHASE_RUNNING)
        return Result()

    # --- names -------------------------------------------------------------------------------

    async def _names_refused(self, p: Pass) -> bool:
        """Whether a name the set gives (its GitHub config Secret, proxy credential Secrets, CA
        ConfigMap, `cleanup-*` annotations) is not a Kubernetes name: condition
        `NamesValid=False` and a Warning Event name each field, and no request is made by any
        of them (docs/security.md#names-from-tenants). Fixed names turn the condition True."""
        ars = p.lazy
        problems = autoscaling_runner_set_name_problems(ars.object)
        if problems:
            message = "; ".join(problems)
            if self._condition(ars, CONDITION_NAMES, "False", REASON_INVALID_NAME, message):
                p.log.warning("refused: %s", message)
                await self._events.warning(ars.object, reason=REASON_INVALID_NAME, message=message)
                await ars.write(self._objects)
            return True
        conditions = status_of(ars.object).get("conditions") or []
        if any(condition.get("type") == CONDITION_NAMES for condition in conditions):
            self._condition(ars, CONDITION_NAMES, "True", "Valid", "")
        return False

    # --- scale set on GitHub -------------------------------------------------------------------

    @staticmethod
    def _wants_listener(ars: JSONDict) -> bool:
        annotations = metadata_of(ars).get("annotations") or {}
        return annotations.get(ANNOTATION_LISTENER) != LISTENER_DOCKER_RUN

    async def _ensure_scale_set(self, ars: LazyObject, *, verify: bool) -> int | None:
        """The registered scale set's id; None after a write that the next pass continues."""
        obj = ars.object
        spec = obj.get("spec") or {}
        meta = metadata_of(obj)
        if not spec.get("runnerScaleSetName"):
            ars.mutate()["spec"]["runnerScaleSetName"] = meta["name"]
            await ars.write(self._objects)
            return None
        if (spec.get("vaultConfig") or {}).get("type"):
            if self._condition(ars, CONDITION_SCALE_SET, "False", "VaultNotSupported", VAULT):
                await self._events.warning(obj, reason="VaultNotSupported", message=VAULT)
                await ars.write(self._objects)
            return None
        scale_set_id = annotation_int(obj, ANNOTATION_RUNNER_SCALE_SET_ID)
        annotations = meta.get("annotations") or {}
        try:
            await self._scale_sets.check_config(obj)
            if not scale_set_id or scale_set_id <= 0:
                await self._record_scale_set(ars, await self._scale_sets.find_or_register(obj))
                return None
            group = str(spec.get("runnerGroup") or "")
            have_group = annotations.get(ANNOTATION_RUNNER_GROUP_NAME)
            if have_group is None or (group and group.lower() != have_group.lower()):
                updated = await self._scale_sets.move_to_group(obj, scale_set_id, group)
                await self._record_scale_set(ars, updated)
                return None
            name = str(spec["runnerScaleSetName"])
            if name.lower() != str(annotations.get(ANNOTATION_RUNNER_SCALE_SET_NAME, "")).lower():
                await self._record_scale_set(
                    ars, await self._scale_sets.rename(obj, scale_set_id, name)
                )
                return None
            if verify:
                await self._scale_sets.check(obj, scale_set_id)
        except ScaleSetNotFound:
            # Deleted on GitHub behind our back: register it again.
            await self._events.warning(
                obj,
                reason="ScaleSetMissing",
                message=f"scale set {scale_set_id} is gone on GitHub; registering it again",
            )
            ars.mutate()["metadata"].setdefault("annotations", {})[
                ANNOTATION_RUNNER_SCALE_SET_ID
            ] = None
            await ars.write(self._objects)
            return None
        except (ActionsError, KubeError, GitHubConfigError) as exc:
            text = _reason_text(exc)
            if self._condition(ars, CONDITION_SCALE_SET, "False", type(exc).__name__, text):
                await self._events.warning(obj, reason="ScaleSetRegistrationFailed", message=text)
                await ars.write(self._objects)
            raise
        self._condition(ars, CONDITION_SCALE_SET, "True", "Registered", "")
        return scale_set_id

    async def _record_scale_set(self, ars: LazyObject, scale_set: ScaleSet) -> None:
        meta = ars.mutate()["metadata"]
        meta.setdefault("annotations", {}).update(
            {
                ANNOTATION_RUNNER_SCALE_SET_ID: str(scale_set.id),
                ANNOTATION_RUNNER_SCALE_SET_NAME: scale_set.name,
                ANNOTATION_RUNNER_GROUP_NAME: scale_set.runner_group_name,
            }
        )
        url = str((ars.object.get("spec") or {}).get("githubConfigUrl", ""))
        meta.setdefault("labels", {}).update(github_url_labels(url))
        await ars.write(self._objects)

    # --- runner set ----------------------------------------------------------------------------

    @staticmethod
    def _current_runner_set(ars: JSONDict, owned: Sequence[JSONDict]) -> JSONDict | None:
        """The set that holds the scale set's runners: the one recorded on the set, else the
        newest this set controls (ARC's rule: a released ARC names its sets `<set>-xxxxx`, and
        after a spec change the newest is the one in use). Found by owner, never by name."""
        live = [s for s in owned if not is_deleting(s)]
        recorded = (metadata_of(ars).get("annotations") or {}).get(ANNOTATION_RUNNER_SET_NAME)
        for runner_set in live:
            if metadata_of(runner_set)["name"] == recorded:
                return runner_set
        if not live:
            return None
        return max(live, key=lambda s: (created_at(s), metadata_of(s)["name"]))

    async def _drain_others(self, p: Pass, owned: Sequence[JSONDict], *, keep: JSONDict) -> None:
        """Delete every other set this one controls (an older ARC set, left by a spec change):
        its idle runners go at once, its busy ones finish their jobs under the set's finalizer,
        as ARC's `eventual` update drains them."""
        ars = p.object
        for runner_set in owned:
            meta = metadata_of(runner_set)
            if runner_set is keep or is_deleting(runner_set):
                continue
            p.log.info(
                "deleting EphemeralRunnerSet %s, older than %s (busy runners finish first)",
                meta["name"],
                metadata_of(keep)["name"],
            )
            await self._events.normal(
                ars,
                reason="RunnerSetDrained",
                message=f"EphemeralRunnerSet {meta['name']} is older than "
                f"{metadata_of(keep)['name']}: deleted, its busy runners finish first",
            )
            await p.delete(EPHEMERAL_RUNNER_SET, Request.of(runner_set))

    @staticmethod
    def _record_runner_set(ars: LazyObject, runner_set: JSONDict) -> None:
        """Record a set not named like this one (adopted from ARC) on it, with the pass's next
        write, so that the choice stays put and a person sees which set is in use."""
        name = metadata_of(runner_set)["name"]
        annotations = metadata_of(ars.object).get("annotations") or {}
        if (
            name == metadata_of(ars.object)["name"]
            and ANNOTATION_RUNNER_SET_NAME not in annotations
        ):
            return
        if annotations.get(ANNOTATION_RUNNER_SET_NAME) != name:
            ars.mutate()["metadata"].setdefault("annotations", {})[ANNOTATION_RUNNER_SET_NAME] = (
                name
            )

    async def _update_runner_set(
        self, ars: JSONDict, runner_set: JSONDict, scale_set_id: int
    ) -> bool:
        """Bring the set's computed labels, annotations, runner metadata and runner spec up to
        date in one patch; True when the runner spec changed (its revision advanced)."""
        lazy = LazyObject(runner_set, kind=EPHEMERAL_RUNNER_SET)
        meta = metadata_of(runner_set)
        spec = runner_set.get("spec") or {}
        labels = drifted(
            meta.get("labels"),
            runner_set_labels(ars, excluded_prefixes=self._settings.excluded_label_prefixes),
        )
        annotations = drifted(meta.get("annotations"), runner_set_annotations(ars))
        desired_runner_spec = runner_spec(ars, scale_set_id=scale_set_id)
        digest = json_digest(desired_runner_spec)
        recorded = (meta.get("annotations") or {}).get(ANNOTATION_RUNNER_SPEC_HASH)
        if recorded != digest and not is_own_digest(recorded):
            # Released ARC's digest (a set adopted from ARC): it says nothing about the spec this
            # controller builds, so it is replaced without taking it as a change; the runners,
            # idle ones included, stay (docs/install.md#keeping-arcs-helm-release).
            log.info(
                "%s/%s: adopting EphemeralRunnerSet %s with its runners (runner-spec-hash %r "
                "was not written by this controller)",
                meta["namespace"],
                metadata_of(ars)["name"],
                meta["name"],
                recorded,
            )
            edit = lazy.mutate()
            edit["metadata"].setdefault("annotations", {})[ANNOTATION_RUNNER_SPEC_HASH] = digest
            edit["spec"]["ephemeralRunnerSpec"] = desired_runner_spec
            await lazy.write(self._objects, optimistic=True)
            return True
        spec_changed = recorded != digest
        runner_metadata = (ars.get("spec") or {}).get("ephemeralRunnerMetadata")
        metadata_changed = spec.get("ephemeralRunnerMetadata") != runner_metadata
        if not (labels or annotations or spec_changed or metadata_changed):
            return False
        edit = lazy.mutate()
        edit["metadata"].setdefault("labels", {}).update(labels)
        edit["metadata"].setdefault("annotations", {}).update(annotations)
        if metadata_changed:
            edit["spec"]["ephemeralRunnerMetadata"] = runner_metadata
        if spec_changed:
            edit["metadata"]["annotations"][ANNOTATION_RUNNER_SPEC_HASH] = digest
            edit["spec"]["ephemeralRunnerSpec"] = desired_runner_spec
            edit["spec"]["actionableRevision"] = int(spec.get("actionableRevision") or 0) + 1
        await lazy.write(self._objects, optimistic=True)
        return spec_changed

    @staticmethod
    def _outdated(runner_set: JSONDict) -> bool:
        """The runner set found its current runner spec's image deprecated."""
        status = status_of(runner_set)
        applied = int(status.get("appliedActionableRevision") or 0)
        revision = int((runner_set.get("spec") or {}).get("actionableRevision") or 0)
        return status.get("phase") == PHASE_OUTDATED and applied == revision

    async def _hold_outdated(
        self, p: Pass, runner_set: JSONDict, owned: Sequence[JSONDict]
    ) -> Result:
        """Upstream's later rule: stop, hold the runner set at 0, stay until the spec changes."""
        ars = p.lazy
        await self._delete_listeners(p, keep=None)
        spec = runner_set.get("spec") or {}
        if spec.get("replicas") or spec.get("patchID"):
            await self._objects.patch(
                EPHEMERAL_RUNNER_SET,
                metadata_of(runner_set)["namespace"],
                metadata_of(runner_set)["name"],
                {"spec": {"replicas": 0, "patchID": 0}},
            )
        message = (
            "the runner image is deprecated (runners exit with code 7); update the runner "
            "image in spec.template to resume"
        )
        if self._condition(ars, CONDITION_RUNNERS, "False", "RunnerOutdated", message):
            await self._events.warning(ars.object, reason="RunnerOutdated", message=message)
        await self._write_status(p, owned, phase=PHASE_OUTDATED)
        return Result()

    # --- listener ------------------------------------------------------------------------------

    async def _policy_refused(self, ars: LazyObject) -> bool:
        """Whether `spec.scalingPolicy` is invalid (docs/policies.md): condition
        `ScalingPolicyValid=False` and a Warning Event say why; a fixed policy turns it True.
        A set whose listener runs with `docker run` has its policy in that listener's config."""
        if not self._wants_listener(ars.object):
            return False
        problem = scaling_policy_problem(ars.object)
        if problem is not None:
            if self._condition(ars, CONDITION_POLICY, "False", "InvalidScalingPolicy", problem):
                await self._events.warning(
                    ars.object, reason="InvalidScalingPolicy", message=problem
                )
            return True
        conditions = status_of(ars.object).get("conditions") or []
        if any(condition.get("type") == CONDITION_POLICY for condition in conditions):
            self._condition(ars, CONDITION_POLICY, "True", "Valid", "")
        return False

    async def _report_foreign_listeners(self, p: Pass) -> None:
        """ARC's AutoscalingListener for this set, left in ARC's namespace (`arc-systems`), keeps
        a pod holding the scale set's message session. This controller may not delete in that
        namespace, so it says so: condition `SingleListener=False` and a Warning Event naming
        it (docs/install.md#keeping-arcs-helm-release); the condition turns True once it is gone."""
        ars = p.lazy
        meta = metadata_of(ars.object)
        foreign = sorted(
            f"{metadata_of(listener)['namespace']}/{metadata_of(listener)['name']}"
            for listener in self._listeners.list()
            if metadata_of(listener)["namespace"] != self._settings.controller_namespace
            and (listener.get("spec") or {}).get("autoscalingRunnerSetNamespace")
            == meta["namespace"]
            and (listener.get("spec") or {}).get("autoscalingRunnerSetName") == meta["name"]
        )
        if foreign:
            message = (
                f"AutoscalingListener {', '.join(foreign)} (ARC's) names this set and its pod may "
                "hold the scale set's message session: stop ARC's controller and run "
                "`gha-controller migrate-from-arc --keep-helm-release --apply`"
            )
            if self._condition(ars, CONDITION_LISTENER, "False", "ForeignListener", message):
                p.log.warning("%s", message)
                await self._events.warning(ars.object, reason="ForeignListener", message=message)
            return
        conditions = status_of(ars.object).get("conditions") or []
        if any(condition.get("type") == CONDITION_LISTENER for condition in conditions):
            self._condition(ars, CONDITION_LISTENER, "True", "Single", "")

    async def _ensure_listener(self, p: Pass, scale_set_id: int, runner_set: str) -> None:
        ars = p.object
        if not self._wants_listener(ars):
            await self._delete_listeners(p, keep=None)
            return
        desired = new_listener(
            ars,
            namespace=self._settings.controller_namespace,
            scale_set_id=scale_set_id,
            runner_set=runner_set,
            image=self._settings.listener_image,
            image_pull_secrets=self._settings.image_pull_secrets,
            excluded_prefixes=self._settings.excluded_label_prefixes,
        )
        name = desired["metadata"]["name"]
        await self._delete_listeners(p, keep=name)
        current = self._listeners.get(self._settings.controller_namespace, name)
        if current is None:
            # A create that the cache has not shown yet is not made twice.
            await p.ensure(AUTOSCALING_LISTENER, desired, None)
            return
        if is_deleting(current):
            return
        meta = metadata_of(current)
        metadata_drifted = drifted(meta.get("labels"), desired["metadata"]["labels"]) or drifted(
            meta.get("annotations"), desired["metadata"]["annotations"]
        )
        if not metadata_drifted and only_listener_replicas_differ(
            current.get("spec") or {}, desired["spec"]
        ):
            await self._objects.patch(
                AUTOSCALING_LISTENER,
                self._settings.controller_namespace,
                name,
                {"spec": {LISTENER_REPLICAS: desired["spec"].get(LISTENER_REPLICAS)}},
            )
            p.log.info("listener %s scaled to %s", name, desired["spec"].get(LISTENER_REPLICAS))
            return
        if current.get("spec") != desired["spec"] or metadata_drifted:
            # A listener runs with what it was made with: re-create it (its delete event brings
            # the next pass, which makes the new one).
            await p.delete(AUTOSCALING_LISTENER, Request.of(current))

    async def _delete_listeners(self, p: Pass, *, keep: str | None) -> bool:
        """Delete this set's listeners but `keep`; True while any of them still exists."""
        meta = metadata_of(p.object)
        left = False
        for listener in self._listeners.list(self._settings.controller_namespace):
            spec = listener.get("spec") or {}
            if (
                spec.get("autoscalingRunnerSetNamespace") != meta["namespace"]
                or spec.get("autoscalingRunnerSetName") != meta["name"]
                or metadata_of(listener)["name"] == keep
            ):
                continue
            left = True
            if not is_deleting(listener):
                await p.delete(AUTOSCALING_LISTENER, Request.of(listener))
        return left

    # --- status --------------------------------------------------------------------------------

    async def _write_status(self, p: Pass, owned: Sequence[JSONDict], *, phase: str) -> None:
        """Phase and the counts of every runner of the scale set: those of each set this one
        controls, a set being drained included (ARC counts only its newest)."""

        def total(field: str) -> int:
            return sum(int(status_of(s).get(field) or 0) for s in owned)

        desired = {
            "phase": phase,
            "currentRunners": total("currentReplicas"),
            "pendingEphemeralRunners": total("pendingEphemeralRunners"),
            "runningEphemeralRunners": total("runningEphemeralRunners"),
            "failedEphemeralRunners": total("failedEphemeralRunners"),
        }
        if phase == PHASE_RUNNING:
            self._condition(p.lazy, CONDITION_RUNNERS, "True", "UpToDate", "")
        if not await p.write_status(desired):
            # The conditions set in this pass go on their own.
            await p.write()

    def _condition(
        self, ars: LazyObject, kind: str, status: str, reason: str, message: str
    ) -> bool:
        """Set a condition in the pending edit, written with the pass's next write; whether it
        changed (a Warning Event goes with a change only, not with every retry). What this
        process last set counts too: the cache may not show its write yet."""
        mine = self._conditions.setdefault(str(metadata_of(ars.object).get("uid")), {})
        wanted = (status, reason, message)
        cached = list(status_of(ars.object).get("conditions") or [])
        have = mine.get(kind) or next((c for c in cached if c.get("type") == kind), None)
        if have is not None and (have.get("status"), have.get("reason"), have.get("message")) == (
            wanted
        ):
            mine[kind] = have
            return False
        mine[kind] = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "observedGeneration": int(metadata_of(ars.object).get("generation") or 0),
        }
        # The whole list is written: each condition as this process last wrote it, not as a
        # cache that has not shown that write yet has it.
        types = [c.get("type") for c in cached]
        conditions = [mine.get(str(c.get("type")), c) for c in cached]
        conditions += [entry for type_, entry in mine.items() if type_ not in types]
        ars.mutate().setdefault("status", {})["conditions"] = conditions
        return True

    # --- deletion ------------------------------------------------------------------------------

    async def _finalize(self, p: Pass) -> Result:
        ars, obj = p.lazy, p.object
        if not has_any_finalizer(obj, [FINALIZER_AUTOSCALING_RUNNER_SET]):
            return Result()
        meta = metadata_of(obj)
        if await self._delete_listeners(p, keep=None):
            return Result(requeue_after=WAIT)
        owned = self._runner_sets.owned_by(p.uid)
        if owned:
            # Every set it controls, an adopted or drained one of ARC's included; the scale set
            # on GitHub goes only once no runner of it is left.
            for runner_set in owned:
                if not is_deleting(runner_set):
                    await p.delete(EPHEMERAL_RUNNER_SET, Request.of(runner_set))
            return Result(requeue_after=WAIT)
        await self._delete_scale_set(ars)
        refused = cleanup_annotation_problems(meta.get("annotations"))
        if refused:
            # ARC's Helm objects are named by these; one that is not a name is left alone, and
            # the set still goes.
            await self._events.warning(
                obj, reason=REASON_INVALID_NAME, message="; ".join(refused) + ": left alone"
            )
        for annotation, kind in CLEANUP_TARGETS:
            name = (meta.get("annotations") or {}).get(annotation)
            if name and not cleanup_annotation_problems({annotation: name}):
                # Always the set's own namespace (ARC's rule).
                await self._strip_cleanup_protection(kind, meta["namespace"], name)
        await remove_finalizers(ars, self._objects, [FINALIZER_AUTOSCALING_RUNNER_SET])
        p.log.info("finalizer removed")
        self._conditions.pop(p.uid, None)
        return Result()

    async def _delete_scale_set(self, ars: LazyObject) -> None:
        obj = ars.object
        scale_set_id = annotation_int(obj, ANNOTATION_RUNNER_SCALE_SET_ID)
        if not scale_set_id or scale_set_id <= 0:
            return
        try:
            await self._scale_sets.delete(obj, scale_set_id)
        except (GitHubConfigError, InvalidArgument, NotFound, Forbidden) as exc:
            # Credentials gone (namespace deletion): waiting cannot bring them back.
            await self._events.warning(
                obj,
                reason="ScaleSetLeftOnGitHub",
                message=f"scale set {scale_set_id} could not be deleted on GitHub "
                f"({_reason_text(exc)}); delete it by hand",
            )
        ars.mutate()["metadata"]["annotations"][ANNOTATION_RUNNER_SCALE_SET_ID] = None
        await ars.write(self._objects)

    async def _strip_cleanup_protection(self, kind: Kind, namespace: str, name: str) -> None:
        try:
            obj = await self._objects.get(kind, namespace, name)
        except NotFound:
            return
        except Forbidden:
            if kind.kind == "Secret":  # ARC's rule: a Secret we may not read counts as gone
                return
            raise
        await remove_finalizers(
            LazyObject(obj, kind=kind), self._objects, [FINALIZER_CLEANUP_PROTECTION]
        )


def _reason_text(exc: BaseException) -> str:
    """One stable line for a condition and an Event: the service's own words without the
    request's ids (which change on every retry and would make every retry a new message)."""
    if isinstance(exc, ActionsError) and exc.status:
        detail = str(exc).split(f"{exc.type_name}: ", 1)[-1] if exc.type_name else ""
        return f"GitHub answered {exc.status}" + (f": {detail}" if detail else "")
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def setup(manager: Manager, deps: Deps) -> AutoscalingRunnerSetReconciler:
    """Add the AutoscalingRunnerSet controller to `manager`: sets, the runner sets they own, and
    their listeners (mapped back by spec: no owner reference crosses namespaces)."""
    if deps.autoscaling is None:
        raise ValueError("the AutoscalingRunnerSet reconciler needs in-cluster settings")
    reconciler = AutoscalingRunnerSetReconciler(
        sets=manager.cache(AUTOSCALING_RUNNER_SET),
        runner_sets=manager.cache(EPHEMERAL_RUNNER_SET),
        listeners=manager.cache(AUTOSCALING_LISTENER),
        objects=manager.objects,
        clients=deps.clients,
        events=deps.events,
        settings=deps.autoscaling,
        expectations=deps.expectations,
    )
    manager.add(
        Controller(
            name="autoscalingrunnerset",
            for_=AUTOSCALING_RUNNER_SET,
            reconciler=reconciler,
            owns=[Owns(EPHEMERAL_RUNNER_SET, predicate=ERS_TO_ARS, defer=ERS_COUNTS)],
            # Its status write ends a pass; its other writes are continued by their echo.
            own_writes=frozenset({OwnWrite.STATUS}),
            watches=[Watches(AUTOSCALING_LISTENER, map=_listener_key)],
        )
    )
    return reconciler
