"""Pure decisions of the AutoscalingListener reconciler (docs/autoscaling.md#autoscalinglistener):
`plan(observed)` says what a pass does, in order, and why; the reconciler observes, plans and
applies the plan through its pass.

The branches of `plan`, in their order:

1. A listener outside the controller's namespace: said once, never acted on (its children
   would go to a namespace the controller may not write to: a loop of 403s).
2. Deletion: the pods first, and nothing else until they are gone (a listener stopping on
   SIGTERM still needs its Role); then the config and proxy (with a proxy) Secrets, the
   standby Lease (when standby replicas ran), the RoleBinding, the Role and the ServiceAccount,
   each asked for once; once all are gone, the finalizer.
3. The finalizer added; a listener whose AutoscalingRunnerSet is gone deletes itself; Key Vault
   credentials refused.
4. The children: what the API holds of them is needed from here on, read only for a listener
   that gets this far (`Plan.read`). The ServiceAccount, the Role (with standby turned off, the
   extra pods and the Lease go before the rule that lets them renew it), the RoleBinding (made
   again when its roleRef was edited), the proxy Secret. A config the listener would refuse, a
   template beyond the allow-list (its old pods go) or one the listener cannot run stops here
   with a warning; then the standby Lease (created only), the config Secret.
5. The pods, one per replica, each on its own: created (after the restart backoff), made again
   when its integrity hash changed, restarted with a doubling backoff when it stopped; the
   replicas beyond `listenerReplicas` deleted; a container that cannot start, and a crash loop,
   said on the listener.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from controller.autoscalinglistener.group import (
    Group,
    group_config_secret,
    group_listener,
    group_pod,
    group_problem,
    group_proxy_secret,
    group_role,
    group_role_binding,
    group_service_account,
)
from controller.autoscalinglistener.objects import (
    config_secret,
    granted_leases,
    lease,
    lease_name,
    listener_config,
    listener_pod,
    listener_replicas,
    pod_name,
    proxy_secret,
    role,
    role_binding,
    service_account,
    standby_lease_name,
    template_problem,
    template_refusals,
)
from controller.github.credentials import REASON_VAULT_NOT_SUPPORTED, vault_refusal
from controller.runtime.plans import AddFinalizer, RemoveFinalizer, Settle, Warn
from controller.settings import ListenerSettings
from shared.api.names import (
    ANNOTATION_INTEGRITY_HASH,
    FINALIZER_AUTOSCALING_LISTENER,
    LISTENER_CONTAINER,
    MAX_LISTENER_REPLICAS,
)
from shared.backoff import doubling
from shared.kube.objects import (
    LEASE,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    Kind,
)
from shared.kube.views import is_deleting, metadata_of, pod_ready
from shared.listenerconfig import ListenerSettings as ListenerConfig
from shared.listenerconfig import SettingsError
from shared.typedefs import JSONDict

WAIT = 1.0
"""Seconds between looks at a listener being deleted, while a child is left."""
CRASH_LOOP_EVENT_AFTER = 3

REASON_CONFIG_INVALID = "ListenerConfigInvalid"
REASON_TEMPLATE_REFUSED = "ListenerTemplateRefused"
REASON_TEMPLATE_INVALID = "ListenerTemplateInvalid"
REASON_POD_REFUSED = "ListenerPodRefused"
REASON_CONTAINER_WAITING = "ListenerContainerWaiting"
REASON_CRASH_LOOPING = "ListenerCrashLooping"
REASON_CANNOT_DELETE = "CannotDelete"
REASON_GROUP_REFUSED = "ListenerGroupRefused"
REFUSALS = (
    REASON_VAULT_NOT_SUPPORTED,
    REASON_CONFIG_INVALID,
    REASON_TEMPLATE_REFUSED,
    REASON_TEMPLATE_INVALID,
    REASON_GROUP_REFUSED,
)
"""Why a listener gets no config and no pod; one holds at a time."""

Child = tuple[Kind, str, str]
"""A child by kind, namespace and name."""


class ListenerStep(Enum):
    """One-off steps the reconciler notes about a listener."""

    FOREIGN_SAID = "foreign said"
    """That the listener lives outside the controller's namespace was logged."""


@dataclass(frozen=True, slots=True)
class Restarts:
    """One replica's restart backoff."""

    count: int = 0
    """Stops in a row, since the pod was last ready for `stable_seconds`."""
    not_before: float = 0.0
    """The monotonic time before which the pod is not made again."""
    ready_since: float | None = None


@dataclass(slots=True)
class ListenerMemory:
    """What the reconciler remembers of one listener (`Pass.memory`, forgotten with it)."""

    restarts: dict[int, Restarts] = field(default_factory=dict)
    """By replica."""
    lease_owed: bool = False
    """Being deleted, it ran standby replicas: their Lease goes after their pods, although the
    spec may say one replica by then."""
    gone: frozenset[Child] = frozenset()
    """Being deleted, the children found gone: not asked for again."""


# --- what a pass observes ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the API holds for a listener that gets as far as its children: the GitHub Secret's
    keys and the CA (through `controller.github`), the proxy data, and the Role and RoleBinding
    as stored (None: there is none)."""

    credentials: Mapping[str, str] = field(repr=False)
    root_ca: str = ""
    proxy: Mapping[str, str] | None = field(default=None, repr=False)
    role: JSONDict | None = None
    role_binding: JSONDict | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    listener: JSONDict
    settings: ListenerSettings
    now: float
    """Monotonic seconds."""
    runner_set: JSONDict | None = None
    """Its AutoscalingRunnerSet as the cache shows it; None when it is gone."""
    pods: Mapping[int, JSONDict] = field(default_factory=dict)
    """Its pods as the cache shows them, by replica (any of 0..MAX_LISTENER_REPLICAS-1)."""
    restarts: Mapping[int, Restarts] = field(default_factory=dict)
    lease_owed: bool = False
    gone: frozenset[Child] = frozenset()
    foreign_said: bool = False
    inputs: Inputs | None = None
    """None until the plan asks for them (`Plan.read`)."""
    group: Group | None = None
    """The listener group it names (docs/autoscaling.md#listener-groups), None when it has a
    pod of its own; `pods` and `restarts` are then the group's."""


# --- what a pass does ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteSelf:
    pass


@dataclass(frozen=True, slots=True)
class NoteForeign:
    pass


@dataclass(frozen=True, slots=True)
class Ensure:
    """Bring a child to `desired` (`Pass.ensure`): created when absent, else patched when its
    integrity hash or labels differ or one of `fields` was edited; with `create_only` never
    updated. `current` is what was read (`read`: read it now)."""

    kind: Kind
    desired: JSONDict = field(repr=False)
    current: JSONDict | None = field(default=None, repr=False)
    read: bool = True
    fields: tuple[str, ...] = ()
    create_only: bool = False
    prune: bool = False
    """The keys of `data` that `desired` no longer has are removed (a listener group's config
    Secret when a member leaves: a merge patch keeps the keys it does not name)."""

    def drift(self, current: JSONDict, desired: JSONDict) -> list[str]:
        if self.create_only:
            return []
        want = desired["metadata"]
        have = metadata_of(current)
        drifted = [f for f in self.fields if normalized(current.get(f)) != desired[f]]
        hash_key = ANNOTATION_INTEGRITY_HASH
        if (have.get("annotations") or {}).get(hash_key) != want["annotations"][hash_key]:
            drifted.append("content")
        labels = have.get("labels") or {}
        if any(labels.get(k) != v for k, v in want["labels"].items()):
            drifted.append("metadata.labels")
        return drifted


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete an object by key (gone already counts as done)."""

    kind: Kind
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class DeleteChild:
    """Finalizing: delete a child once; an answer holding it with finalizers leaves it."""

    child: Child


@dataclass(frozen=True, slots=True)
class CreatePod:
    """Create a replica's pod; the API server may refuse it (Pod Security): said on the
    listener as `ListenerPodRefused`, tried again in a resync."""

    replica: int
    desired: JSONDict = field(repr=False)


Action = (
    AddFinalizer
    | RemoveFinalizer
    | DeleteSelf
    | NoteForeign
    | Ensure
    | Delete
    | DeleteChild
    | CreatePod
    | Warn
    | Settle
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a pass does, in order, and why."""

    steps: tuple[Action, ...] = ()
    why: tuple[str, ...] = ()
    """The decisions, one phrase each ("" when the pass only checks its children)."""
    requeue_after: float | None = None
    read: bool = False
    """The plan reached the children: plan again with `Observed.inputs` read."""
    running: bool | None = None
    """The running-listeners gauge's value (None: left as it is)."""
    restarts: Mapping[int, Restarts] | None = None
    """The restart backoffs to remember (None: unchanged)."""
    lease_owed: bool = False
    finalizing: bool = False
    """Deleting the children of a listener being deleted: once all are gone, plan again."""

    def describe(self) -> str:
        """The plan in one line (logged once per pass that decides something)."""
        return "; ".join(self.why)


# --- the decisions -------------------------------------------------------------------------------


def plan(observed: Observed) -> Plan:
    """What the pass over `observed` does (module docstring)."""
    listener = observed.listener
    meta = metadata_of(listener)
    home = observed.settings.controller_namespace
    if home and meta["namespace"] != home:
        if observed.foreign_said:
            return Plan()
        return Plan(steps=(NoteForeign(),), why=(f"not reconciled: listeners live in {home}",))
    if is_deleting(listener):
        if observed.group is not None:
            return _finalize_grouped(observed, observed.group)
        return _finalize(observed)
    if FINALIZER_AUTOSCALING_LISTENER not in (meta.get("finalizers") or []):
        return Plan(steps=(AddFinalizer(),), why=("finalizer added",))
    runner_set = observed.runner_set
    if runner_set is None:
        return Plan(
            steps=(DeleteSelf(),),
            why=("its AutoscalingRunnerSet is gone: deleting the listener",),
        )
    spec = listener.get("spec") or {}
    if refusal := vault_refusal(spec):
        return Plan(
            steps=(
                *_settle_but(REASON_VAULT_NOT_SUPPORTED),
                Warn(REASON_VAULT_NOT_SUPPORTED, refusal),
            ),
            why=(f"no listener pod: {REASON_VAULT_NOT_SUPPORTED}",),
        )
    if observed.group is not None:
        return _group_children(observed, observed.group, runner_set)
    if observed.inputs is None:
        return Plan(read=True)
    return _children(observed, observed.inputs, runner_set)


def _children(observed: Observed, inputs: Inputs, runner_set: JSONDict) -> Plan:
    listener, settings = observed.listener, observed.settings
    spec = listener.get("spec") or {}
    namespace = metadata_of(listener)["namespace"]
    steps: list[Action] = [Ensure(SERVICE_ACCOUNT, service_account(listener))]
    why: list[str] = []
    deleted: set[int] = set()

    def delete_pods(keep: int) -> int:
        """Delete the pods of replicas `keep` and above (once each); how many."""
        doomed = [
            replica
            for replica, pod in sorted(observed.pods.items())
            if replica >= keep and replica not in deleted and not is_deleting(pod)
        ]
        deleted.update(doomed)
        steps.extend(Delete(POD, namespace, pod_name(listener, r)) for r in doomed)
        return len(doomed)

    standby = standby_lease_name(listener)
    if not standby and granted_leases(inputs.role):
        # The Role still granting the Lease is what tells a later pass (or a restarted
        # controller) that the extra pods and the Lease may be left: they go before the rule.
        why.append("standby turned off: the extra pods and the Lease go")
        delete_pods(keep=1)
        steps.append(
            Delete(LEASE, str(spec.get("autoscalingRunnerSetNamespace")), lease_name(listener))
        )
    steps.append(Ensure(ROLE, role(listener), inputs.role, read=False, fields=("rules",)))
    steps += _role_binding_steps(role_binding(listener), inputs.role_binding, why)
    if spec.get("proxy"):
        steps.append(Ensure(SECRET, proxy_secret(listener, inputs.proxy or {})))

    config = _config(listener, inputs, settings)
    refused = _refusal(observed, config)
    if refused is not None:
        reason, message = refused
        steps += _settle_but(reason)
        also_on = (runner_set,) if reason == REASON_TEMPLATE_REFUSED else ()
        steps.append(Warn(reason, message, also_on=also_on))
        why.append(f"no listener pod: {reason}")
        if reason == REASON_TEMPLATE_REFUSED:
            # Not from a tenant's namespace into ours (docs/security.md#listener-pod); a pod
            # made from it before (templates were trusted then) goes. Its edit brings it back.
            delete_pods(keep=0)
            return Plan(steps=tuple(steps), why=tuple(why))
        if reason == REASON_CONFIG_INVALID:
            # Never written: the listener would crash-loop. The Secret and ConfigMap it came
            # from are not watched: looked at again in a resync.
            return Plan(steps=tuple(steps), why=tuple(why), requeue_after=settings.resync_seconds)
        # The template is the listener's spec: its edit brings the listener back.
        return Plan(steps=tuple(steps), why=tuple(why))
    steps += [Settle(reason) for reason in REFUSALS]
    if standby:
        # Made before the pods, so that none of them needs `create` on Leases; never updated:
        # its holder, renewals and annotations belong to the pods.
        steps.append(Ensure(LEASE, lease(listener), create_only=True))
    secret = config_secret(listener, config)
    steps.append(Ensure(SECRET, secret))

    replicas = listener_replicas(listener)
    if extra := delete_pods(keep=replicas):
        why.append(f"{extra} pod(s) beyond listenerReplicas {replicas} deleted")
    digest = str(secret["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH])
    desired = [
        listener_pod(
            listener,
            config_digest=digest,
            metrics_addr=settings.metrics_addr,
            replica=replica,
            entrypoint=settings.entrypoint,
            resources=settings.resources,
        )
        for replica in range(replicas)
    ]
    rolling = bool(standby) and bool(granted_leases(inputs.role))
    return _with_pods(observed, steps, why, desired, dict(observed.restarts), rolling=rolling)


def _with_pods(
    observed: Observed,
    steps: list[Action],
    why: list[str],
    desired: list[JSONDict],
    restarts: dict[int, Restarts],
    *,
    rolling: bool,
) -> Plan:
    """The plan of `steps`, then each replica's pod decided on its own (`_pod`): `desired[i]`
    is replica i's; `restarts` gets each one's backoff. `rolling`: the pods running and those
    to make all stand by on Leases, so pods of an older config are replaced one at a time."""
    turn = _next_to_roll(observed, desired) if rolling else None
    delays: list[float] = []
    states: list[bool] = []
    for replica, pod_desired in enumerate(desired):
        replace_now = not rolling or turn is None or turn == replica
        pod = _pod(observed, replica, pod_desired, replace_now=replace_now)
        steps += pod.steps
        why += pod.why
        restarts[replica] = pod.restarts
        if pod.requeue_after is not None:
            delays.append(pod.requeue_after)
        if pod.running is not None:
            states.append(pod.running)
    return Plan(
        steps=tuple(steps),
        why=tuple(why),
        requeue_after=min(delays) if delays else None,
        running=any(states) if states else None,
        restarts=restarts,
    )


def _role_binding_steps(
    binding: JSONDict, current: JSONDict | None, why: list[str]
) -> list[Action]:
    """Ensure `binding`; one whose roleRef was edited is deleted first, since a roleRef cannot
    be changed in place."""
    steps: list[Action] = []
    if current is not None and normalized(current.get("roleRef")) != binding["roleRef"]:
        why.append("RoleBinding's roleRef edited: made again")
        steps.append(
            Delete(ROLE_BINDING, binding["metadata"]["namespace"], binding["metadata"]["name"])
        )
        current = None
    steps.append(Ensure(ROLE_BINDING, binding, current, read=False, fields=("subjects",)))
    return steps


def _config(listener: JSONDict, inputs: Inputs, settings: ListenerSettings) -> JSONDict:
    return listener_config(
        listener,
        credentials=inputs.credentials,
        root_ca=inputs.root_ca,
        log_level=settings.log_level,
        log_format=settings.log_format,
        metrics_addr=settings.metrics_addr,
        metrics_endpoint=settings.metrics_endpoint if settings.metrics_addr else "",
        standby=settings.standby,
        allow_insecure_github=settings.allow_insecure_github,
        metrics_auth=settings.metrics_auth,
    )


def _group_children(observed: Observed, group: Group, runner_set: JSONDict) -> Plan:
    """A member's pass over its group, or why this set is not served. The group's first member
    makes the group's objects from every member it serves (a listener pod per replica, each
    serving every member, made again when a member joins or leaves; with standby, a Lease per
    member); the others check their own config and report the pods: a group's change then
    costs one pass that builds every member's config, not one per member."""
    listener, settings = observed.listener, observed.settings
    name = metadata_of(listener)["name"]
    if (problem := group_problem(listener)) is not None or name in group.refused:
        message = problem or group.refused[name]
        return Plan(
            steps=(
                *_settle_but(REASON_GROUP_REFUSED),
                Warn(REASON_GROUP_REFUSED, message, also_on=(runner_set,)),
            ),
            why=(f"no listener pod: {REASON_GROUP_REFUSED}",),
            running=False,
        )
    if name not in group.member_names():
        # Being deleted, as the cache shows by now (a member is any listener of the group not
        # being deleted): its deletion's event brings the pass that finalizes it.
        return Plan()
    inputs = observed.inputs
    if inputs is None:
        return Plan(read=True)
    leader = group.member_names()[0] == name
    configs: dict[str, JSONDict] = {}
    own_problem = None
    for member in group.members if leader else (listener,):
        config = _config(group.served(member), inputs, settings)
        problem = config_problem(config)
        if problem is None:
            configs[metadata_of(member)["name"]] = config
        elif metadata_of(member)["name"] == name:
            own_problem = problem
    own: tuple[Action, ...] = (Settle(REASON_CONFIG_INVALID),)
    if own_problem is not None:
        # Left out of the group's config: the one process would refuse every set for it.
        own = (*_settle_but(REASON_CONFIG_INVALID), Warn(REASON_CONFIG_INVALID, own_problem))
    if not leader or not configs:
        running = own_problem is None and any(
            not is_deleting(pod) and container_state(pod, "running")
            for pod in observed.pods.values()
        )
        return Plan(
            steps=own if own_problem else (*own, *(Settle(r) for r in REFUSALS)),
            why=(f"no listener pod: {REASON_CONFIG_INVALID}",) if own_problem else (),
            requeue_after=settings.resync_seconds if own_problem else None,
            running=running,
        )
    pseudo = group_listener(group)
    refused = _refusal(replace(observed, listener=pseudo), next(iter(configs.values())))
    if refused is not None:
        reason, message = refused
        also_on = (runner_set,) if reason == REASON_TEMPLATE_REFUSED else ()
        return Plan(
            steps=(*_settle_but(reason), Warn(reason, message, also_on=also_on)),
            why=(f"no listener pod: {reason}",),
            running=False,
        )
    serving = [member for member in group.members if metadata_of(member)["name"] in configs]
    served = [
        str((member.get("spec") or {}).get("ephemeralRunnerSetName", "")) for member in serving
    ]
    replicas = group.replicas
    leases = [lease_name(member) for member in serving] if replicas > 1 else []
    secret = group_config_secret(group, configs)
    digest = str(secret["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH])
    desired = [
        group_pod(
            group,
            config_digest=digest,
            metrics_addr=settings.metrics_addr,
            entrypoint=settings.entrypoint,
            resources=settings.resources,
            replica=replica,
        )
        for replica in range(replicas)
    ]
    hash_key = ANNOTATION_INTEGRITY_HASH
    want = desired[0]["metadata"]["annotations"][hash_key]
    steps: list[Action] = [
        *(own if own_problem else (Settle(reason) for reason in REFUSALS)),
        Ensure(SERVICE_ACCOUNT, group_service_account(group)),
    ]
    why: list[str] = []
    if any(
        replica >= replicas
        or is_deleting(pod)
        or (metadata_of(pod).get("annotations") or {}).get(hash_key) != want
        for replica, pod in observed.pods.items()
    ):
        # The pods still running serve the sets and Leases they were made for: their rules
        # stay until they are gone, so a member leaving does not stop them with a 403 before
        # they are replaced, and a pod stopping can still release its Leases.
        served += _patched_runner_sets(inputs.role)
        leases += granted_leases(inputs.role)
    else:
        # No pod serves them any more: the Leases of sets no longer served go before the rules
        # on them, which are how a later pass (or a restarted controller) finds them.
        stale = sorted(set(granted_leases(inputs.role)) - set(leases))
        steps += [Delete(LEASE, group.namespace, stale_lease) for stale_lease in stale]
        if stale:
            why.append(f"{len(stale)} Lease(s) of sets no longer served by standby deleted")
    steps.append(
        Ensure(ROLE, group_role(group, served, leases), inputs.role, read=False, fields=("rules",))
    )
    steps += _role_binding_steps(group_role_binding(group), inputs.role_binding, why)
    if (pseudo.get("spec") or {}).get("proxy"):
        steps.append(Ensure(SECRET, group_proxy_secret(group, inputs.proxy or {}), prune=True))
    if replicas > 1:
        # Made before the pods, as a set's own (`_children`): every pod serves every member.
        steps += [Ensure(LEASE, lease(member), create_only=True) for member in serving]
    steps.append(Ensure(SECRET, secret, prune=True))
    extra = [
        replica
        for replica, pod in sorted(observed.pods.items())
        if replica >= replicas and not is_deleting(pod)
    ]
    steps += [Delete(POD, group.home, pod_name(pseudo, replica)) for replica in extra]
    if extra:
        why.append(f"{len(extra)} pod(s) beyond the group's {replicas} replica(s) deleted")
    # Its crash loop said per pod when the group runs more than one.
    # The Role as read granting Leases: the pods running were made with standby too.
    rolling = replicas > 1 and bool(granted_leases(inputs.role))
    return _with_pods(replace(observed, listener=pseudo), steps, why, desired, {}, rolling=rolling)


def _next_to_roll(observed: Observed, desired: list[JSONDict]) -> int | None:
    """Which pod of an older config is replaced now, when standby runs before and after a
    config change: one at a time, the highest replica first, once every other replica has a
    Ready pod to hold the sessions meanwhile (a holder stopping releases its Leases, and a
    Ready standby takes them within a retry period, rather than every session pausing while
    all pods are made again). -1: none yet. None: no pod is Ready, so nothing is served and
    every old pod is replaced at once."""
    pods = observed.pods
    want = desired[0]["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH]

    def ready(replica: int) -> bool:
        pod = pods.get(replica)
        return pod is not None and not is_deleting(pod) and pod_ready(pod)

    if not any(ready(replica) for replica in range(len(desired))):
        return None
    old = [
        replica
        for replica in range(len(desired))
        if replica in pods
        and (metadata_of(pods[replica]).get("annotations") or {}).get(ANNOTATION_INTEGRITY_HASH)
        != want
    ]
    for replica in sorted(old, reverse=True):
        if all(ready(other) for other in range(len(desired)) if other != replica):
            return replica
    return -1


def _patched_runner_sets(role: JSONDict | None) -> list[str]:
    """The EphemeralRunnerSets a stored Role lets its subject patch."""
    return [
        str(name)
        for rule in (role or {}).get("rules") or []
        if rule.get("resources") == ["ephemeralrunnersets"]
        for name in rule.get("resourceNames") or []
    ]


def _finalize_grouped(observed: Observed, group: Group) -> Plan:
    """A member leaving its group: the members left make the group's objects again without it
    (woken by its deletion); the last one deletes the pod, then the group's other objects."""
    listener = observed.listener
    meta = metadata_of(listener)
    if FINALIZER_AUTOSCALING_LISTENER not in (meta.get("finalizers") or []):
        return Plan(running=False)
    if group.members:
        return Plan(
            steps=(RemoveFinalizer(),),
            why=(f"left listener group {group.name}: its other members keep its pod",),
            running=False,
        )
    if observed.pods:
        steps = tuple(
            Delete(POD, group.home, metadata_of(pod)["name"])
            for pod in observed.pods.values()
            if not is_deleting(pod)
        )
        return Plan(
            steps=steps,
            why=(f"last member of listener group {group.name}: its pod deleted",) if steps else (),
            requeue_after=WAIT,
            running=False,
        )
    if observed.inputs is None:
        # The Role names the Leases of the group's standby, whichever members they were for.
        return Plan(read=True, running=False)
    name = group.object_name
    children: list[Child] = [(SECRET, group.home, f"{name}-config")]
    if (listener.get("spec") or {}).get("proxy"):
        children.append((SECRET, group.home, f"{name}-proxy"))
    leases = [
        child
        for lease_left in granted_leases(observed.inputs.role)
        if (child := (LEASE, group.namespace, lease_left)) not in observed.gone
    ]
    children += leases
    if not leases:
        # The Role goes after the Leases it names: if it went first, a Lease it failed to
        # delete would be forgotten.
        children += [
            (ROLE_BINDING, group.namespace, name),
            (ROLE, group.namespace, name),
            (SERVICE_ACCOUNT, group.home, name),
        ]
    left = [child for child in children if child not in observed.gone]
    if not left:
        return Plan(steps=(RemoveFinalizer(),), why=("finalizer removed",), running=False)
    return Plan(steps=tuple(DeleteChild(child) for child in left), running=False, finalizing=True)


def _settle_but(reason: str) -> list[Action]:
    """One refusal holds at a time: the others ended (so a return to one is said again)."""
    return [Settle(other) for other in REFUSALS if other != reason]


def _refusal(observed: Observed, config: JSONDict) -> tuple[str, str] | None:
    """Why the listener gets no config and no pod, as a reason and a message; None when it
    runs."""
    problem = config_problem(config)
    if problem is not None:
        return REASON_CONFIG_INVALID, problem
    listener = observed.listener
    template = (listener.get("spec") or {}).get("template")
    refusals = [] if observed.settings.trust_templates else template_refusals(template)
    if refusals:
        return REASON_TEMPLATE_REFUSED, (
            "listenerTemplate sets what only the operator may set on a listener pod: "
            + ", ".join(f"listenerTemplate.{path}" for path in refusals)
            + "; a template may set labels, annotations, scheduling and the listener "
            "container's resources and env (docs/security.md#listener-pod)"
        )
    problem = template_problem(listener)
    if problem is not None:
        return REASON_TEMPLATE_INVALID, problem
    return None


@dataclass(frozen=True, slots=True)
class _PodPlan:
    steps: tuple[Action, ...]
    why: tuple[str, ...]
    restarts: Restarts
    requeue_after: float | None
    running: bool | None
    """Whether its listener runs (None: unknown, being replaced)."""


def _pod(
    observed: Observed, replica: int, desired: JSONDict, *, replace_now: bool = True
) -> _PodPlan:
    """One replica's decision: its pod is to be `desired`; without `replace_now`, a pod made
    from an older config that still runs is left to serve until its turn (`_next_to_roll`)."""
    listener, settings, now = observed.listener, observed.settings, observed.now
    name = desired["metadata"]["name"]
    namespace = desired["metadata"]["namespace"]
    restarts = observed.restarts.get(replica) or Restarts()
    pod = observed.pods.get(replica)
    if pod is None:
        if now < restarts.not_before:
            return _PodPlan((), (), restarts, restarts.not_before - now, False)
        return _PodPlan(
            (CreatePod(replica, desired),), (f"pod {name} created",), restarts, None, False
        )
    if is_deleting(pod):
        return _PodPlan((), (), restarts, None, None)
    want = desired["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH]
    have = (metadata_of(pod).get("annotations") or {}).get(ANNOTATION_INTEGRITY_HASH)
    if have != want and not replace_now and stopped(pod) is None:
        return _PodPlan((), (), restarts, None, container_state(pod, "running"))
    if have != want:
        return _PodPlan(
            (Delete(POD, namespace, name),),
            (f"re-creating listener pod {name}: its config changed",),
            restarts,
            None,
            None,
        )
    why_stopped = stopped(pod)
    if why_stopped is not None:
        count = restarts.count + 1
        delay = doubling(
            settings.restart_backoff_seconds, count - 1, settings.restart_backoff_max_seconds
        )
        steps: list[Action] = []
        if count >= CRASH_LOOP_EVENT_AFTER:
            who = "listener" if listener_replicas(listener) == 1 else f"listener pod {name}"
            message = (
                f"{who} stopped {count} times in a row ({why_stopped}); next start in {delay:.0f}s"
            )
            steps.append(Warn(REASON_CRASH_LOOPING, message, subject=replica))
        steps.append(Delete(POD, namespace, name))
        return _PodPlan(
            tuple(steps),
            (f"listener {name} stopped ({why_stopped}); restarting in {delay:.1f}s",),
            Restarts(count=count, not_before=now + delay, ready_since=None),
            delay,
            False,
        )
    waiting = waiting_report(pod)
    report: Action = (
        Settle(REASON_CONTAINER_WAITING, subject=replica)
        if waiting is None
        else Warn(REASON_CONTAINER_WAITING, waiting, subject=replica)
    )
    running = container_state(pod, "running")
    if not pod_ready(pod):
        return _PodPlan(
            (report,), (), replace(restarts, ready_since=None), settings.resync_seconds, running
        )
    ready_since = restarts.ready_since if restarts.ready_since is not None else now
    if now - ready_since >= settings.stable_seconds:
        # Ready long enough: no longer crash-looping, its backoff starts again.
        stable = replace(restarts, count=0, ready_since=ready_since)
        return _PodPlan((report,), (), stable, settings.resync_seconds, running)
    requeue = settings.stable_seconds if restarts.count else settings.resync_seconds
    return _PodPlan((report,), (), replace(restarts, ready_since=ready_since), requeue, running)


def _finalize(observed: Observed) -> Plan:
    listener = observed.listener
    meta = metadata_of(listener)
    if FINALIZER_AUTOSCALING_LISTENER not in (meta.get("finalizers") or []):
        return Plan(running=False)
    # The Lease is touched only when standby replicas ran: an ARC-style listener needs no
    # permission on Leases, even to be deleted.
    owed = observed.lease_owed or any(replica > 0 for replica in observed.pods)
    if observed.pods:
        # Pods first, and nothing else until they are gone: a listener stopping on SIGTERM
        # still needs its Role (a standby releases its Lease, the holder deletes its
        # session's state), so the Role, its binding and the Lease go after the last pod.
        steps = tuple(
            Delete(POD, meta["namespace"], pod_name(listener, replica))
            for replica, pod in sorted(observed.pods.items())
            if not is_deleting(pod)
        )
        return Plan(
            steps=steps,
            why=(f"deleting: {len(steps)} pod(s) deleted",) if steps else (),
            requeue_after=WAIT,
            running=False,
            lease_owed=owed,
        )
    left = [c for c in finalized_children(listener, lease=owed) if c not in observed.gone]
    if not left:
        return Plan(
            steps=(RemoveFinalizer(),),
            why=("finalizer removed",),
            running=False,
            lease_owed=owed,
        )
    return Plan(
        steps=tuple(DeleteChild(child) for child in left),
        running=False,
        lease_owed=owed,
        finalizing=True,
    )


def finalized_children(listener: JSONDict, *, lease: bool) -> list[Child]:
    """What a listener's deletion deletes after its pods, in order: only what was made (the
    proxy Secret with a proxy, the Lease when standby replicas ran)."""
    meta = metadata_of(listener)
    spec = listener.get("spec") or {}
    runner_namespace = str(spec.get("autoscalingRunnerSetNamespace"))
    children: list[Child] = [(SECRET, meta["namespace"], f"{meta['name']}-config")]
    if spec.get("proxy"):
        children.append((SECRET, meta["namespace"], f"{meta['name']}-proxy"))
    if lease or standby_lease_name(listener):
        children.append((LEASE, runner_namespace, lease_name(listener)))
    children += [
        (ROLE_BINDING, runner_namespace, meta["name"]),
        (ROLE, runner_namespace, meta["name"]),
        (SERVICE_ACCOUNT, meta["namespace"], meta["name"]),
    ]
    return children


# --- what a pod's and a config's state mean ------------------------------------------------------


def stopped(pod: JSONDict) -> str | None:
    """Why the listener pod must be made again, or None while it runs or starts."""
    status = pod.get("status") or {}
    if status.get("reason") == "Evicted":
        return "evicted"
    if status.get("phase") in ("Succeeded", "Failed"):
        return f"pod {status['phase']}"
    for container in status.get("containerStatuses") or []:
        if container.get("name") != LISTENER_CONTAINER:
            continue
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None:
            return f"exit code {terminated.get('exitCode')}"
    return None


def container_state(pod: JSONDict, state: str) -> bool:
    """Whether the listener container is in `state` (`running`, `waiting`, `terminated`)."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if container.get("name") == LISTENER_CONTAINER:
            return state in (container.get("state") or {})
    return False


def waiting_report(pod: JSONDict) -> str | None:
    """What to say on the listener when a container of its pod cannot start (a template's
    sidecar that must run as root, a missing Secret, an image that cannot be pulled); the
    pod's own events are in the controller namespace, where users of the set may not look.
    None while every container starts or runs."""
    status = pod.get("status") or {}
    stuck = [
        (str(container.get("name")), waiting)
        for container in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        if (waiting := (container.get("state") or {}).get("waiting") or {}).get("reason")
        not in (None, "ContainerCreating", "PodInitializing")
    ]
    if not stuck:
        return None
    name, waiting = stuck[0]
    return f"container {name} of pod {metadata_of(pod)['name']} cannot start: " + (
        f"{waiting['reason']}: {waiting['message']}"
        if waiting.get("message")
        else str(waiting["reason"])
    )


def config_problem(config: JSONDict) -> str | None:
    """Why `gha-listener` would refuse this config, checked with its own model
    (shared.listenerconfig), in one line without any value; None when it would load it."""
    try:
        ListenerConfig.from_values(config)
    except SettingsError as exc:
        return exc.problems[0]
    return None


def normalized(value: object) -> object:
    """A stored RBAC field as we write it: the API server may add empty fields (a subject's
    `apiGroup: ""`)."""
    if isinstance(value, list):
        return [normalized(item) for item in value]
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if v not in ("", None, [])}
    return value


def pods_by_replica(
    listener: JSONDict, cached: Callable[[str, str], JSONDict | None]
) -> dict[int, JSONDict]:
    """The listener's pods as a cache shows them, by replica."""
    namespace = metadata_of(listener)["namespace"]
    pods: dict[int, JSONDict] = {}
    for replica in range(MAX_LISTENER_REPLICAS):
        pod = cached(namespace, pod_name(listener, replica))
        if pod is not None:
            pods[replica] = pod
    return pods
