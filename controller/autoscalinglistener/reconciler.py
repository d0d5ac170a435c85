"""The AutoscalingListener reconciler: one listener pod per scale set (more with standby
replicas, docs/autoscaling.md#listener-standby), with exactly the permissions it needs
(docs/autoscaling.md#autoscalinglistener).

Order of a pass:

1. Read the listener from the cache; gone, or outside the controller's namespace, ends the
   pass.
2. Deletion branch: delete the pods, then the config and proxy (with a proxy) Secrets, the
   standby Lease, the RoleBinding, the Role and the ServiceAccount, each once; once all are
   gone, drop the finalizer.
3. Finalizer. A listener whose AutoscalingRunnerSet is gone deletes itself.
4. ServiceAccount, Role and RoleBinding (the Role's rules and the binding's subjects and
   roleRef brought back when edited), the proxy Secret, the standby Lease with
   `listenerReplicas` above 1, the config Secret (its data rebuilt from the GitHub Secret and
   the CA each pass, so a rotation reaches the listener; a config the listener would refuse is
   not written, and looked at again after `resync_seconds`). A template that sets more than a
   listener needs tuned is refused unless the operator trusts templates
   (docs/security.md#listener-pod); one running ARC's listener with features it lacks is
   refused.
5. The pods, one per replica, each on its own: created, or deleted to be made again when its
   integrity hash changed, when it was evicted or its listener exited, with an exponential
   backoff between re-creations (ARC re-creates a crashing listener at once, hammering GitHub).
   Replicas beyond `listenerReplicas` are deleted. A container that cannot start, or a pod the
   API server refuses (Pod Security), is named in an Event on the listener.

ServiceAccount, Role, RoleBinding, Secrets and the Lease are read through the API, not a cache:
a listener is reconciled on its own and its pods' events only, a few times in its life, and the
controller then needs no cluster-wide watch of Secrets, Roles, RoleBindings or Leases.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from pydantic import ValidationError

from controller.autoscalinglistener.objects import (
    config_secret,
    grants_lease,
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
from controller.deps import Deps
from controller.github.network import proxy_data, root_ca
from controller.runtime import (
    Controller,
    EventRecorder,
    Expectations,
    Manager,
    Owns,
    Pass,
    Passes,
    Request,
    Result,
    Store,
    add_finalizers,
    has_any_finalizer,
    remove_finalizers,
)
from controller.settings import ListenerSettings
from shared.actions.config import parse_config_url
from shared.actions.errors import InvalidConfigURL
from shared.api.kinds import AUTOSCALING_LISTENER, AUTOSCALING_RUNNER_SET
from shared.api.names import (
    ANNOTATION_INTEGRITY_HASH,
    FINALIZER_AUTOSCALING_LISTENER,
    LISTENER_CONTAINER,
    MAX_LISTENER_REPLICAS,
    SECRET_GITHUB_APP_ID,
    SECRET_GITHUB_APP_INSTALLATION_ID,
    SECRET_GITHUB_APP_PRIVATE_KEY,
    SECRET_GITHUB_TOKEN,
)
from shared.kube.errors import Forbidden, KubeError, NamespaceTerminating, NotFound
from shared.kube.objects import (
    LEASE,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    Kind,
    Objects,
)
from shared.kube.views import is_deleting, metadata_of, pod_ready, secret_value
from shared.listenerconfig import ListenerSettings as ListenerConfig
from shared.typedefs import JSONDict

log = logging.getLogger(__name__)

WAIT = 1.0
CRASH_LOOP_EVENT_AFTER = 3
METRIC_RUNNING_LISTENERS = "gha_controller_running_listeners"


@dataclass(slots=True)
class _Restarts:
    count: int = 0
    not_before: float = 0.0
    ready_since: float | None = None


@dataclass(slots=True)
class _Listeners:
    """`gha_controller_running_listeners`, one series per listener."""

    series: dict[Request, tuple[int, dict[str, str]]] = field(default_factory=dict)

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, labels) for value, labels in self.series.values()]

    def publish(self, listener: JSONDict, running: bool) -> None:
        meta = metadata_of(listener)
        try:
            config = parse_config_url(
                str((listener.get("spec") or {}).get("githubConfigUrl")), env={}
            )
        except InvalidConfigURL:
            return
        labels = {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "repository": config.repository,
            "organization": config.organization,
            "enterprise": config.enterprise,
        }
        self.series[Request.of(listener)] = (1 if running else 0, labels)


class AutoscalingListenerReconciler:
    def __init__(
        self,
        *,
        listeners: Store,
        sets: Store,
        pods: Store,
        objects: Objects,
        events: EventRecorder,
        settings: ListenerSettings,
        meter: Meter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listeners = listeners
        # Its steps and warnings, per listener uid; nothing it writes is shared with another
        # reconciler.
        self._passes = Passes(
            kind=AUTOSCALING_LISTENER,
            store=listeners,
            expectations=Expectations(),
            objects=objects,
            logger=log,
        )
        self._sets = sets
        self._pods = pods
        self._lease_owed: set[str] = set()
        self._gone: dict[str, set[tuple[Kind, str, str]]] = {}
        """The children of listeners being deleted that went, per listener uid."""
        """Listeners being deleted that ran standby replicas: their Lease goes after their pods."""
        self._objects = objects
        self._events = events
        self._settings = settings
        self._clock = clock
        self._restarts: dict[tuple[str, int], _Restarts] = {}
        self._refused: dict[str, str] = {}
        self._waiting: dict[tuple[str, int], str] = {}
        """The last container waiting reason reported on each replica's pod."""
        self._foreign: set[Request] = set()
        self._gauge = _Listeners()
        meter.create_observable_gauge(METRIC_RUNNING_LISTENERS, callbacks=[self._gauge.observe])

    @property
    def settings(self) -> ListenerSettings:
        return self._settings

    async def reconcile(self, request: Request) -> Result:
        home = self._settings.controller_namespace
        if home and request.namespace != home:
            # Its children would go to a namespace we may not write to: a loop of 403s.
            if request not in self._foreign:
                self._foreign.add(request)
                log.info(
                    "not reconciling AutoscalingListener %s/%s: listeners live in %s",
                    request.namespace,
                    request.name,
                    home,
                )
            return Result()
        p = self._passes.begin(request)
        if p is None:
            self._gauge.series.pop(request, None)
            return Result()
        cached, uid = p.object, p.uid
        if is_deleting(cached):
            self._gauge.publish(cached, running=False)
            return await self._finalize(p)
        if await add_finalizers(p.lazy, self._objects, [FINALIZER_AUTOSCALING_LISTENER]):
            p.log.info("finalizer added")
            return Result()
        spec = cached.get("spec") or {}
        if (
            self._sets.get(
                str(spec.get("autoscalingRunnerSetNamespace")),
                str(spec.get("autoscalingRunnerSetName")),
            )
            is None
        ):
            p.log.info("its AutoscalingRunnerSet is gone: deleting the listener")
            await p.delete(AUTOSCALING_LISTENER, request)
            return Result()
        if (spec.get("vaultConfig") or {}).get("type"):
            await self._events.warning(
                cached,
                reason="VaultNotSupported",
                message="Azure Key Vault credentials are not supported: put the GitHub "
                "credentials in a Secret named by githubConfigSecret (docs/listener.md)",
            )
            return Result()

        await self._ensure(p, service_account(cached), SERVICE_ACCOUNT)
        await self._ensure_role(p)
        await self._ensure_role_binding(p)
        if spec.get("proxy"):
            data = await proxy_data(
                self._objects, str(spec["autoscalingRunnerSetNamespace"]), spec["proxy"]
            )
            await self._ensure(p, proxy_secret(cached, data), SECRET)
        config = await self._config(cached)
        refused = config_problem(config)
        if refused is not None:
            # Never write a config the listener would refuse at start: it would crash-loop. The
            # Secret and ConfigMap it came from are not watched: looked at again in a resync.
            await self._refuse(cached, uid, "ListenerConfigInvalid", refused)
            return Result(requeue_after=self._settings.resync_seconds)
        refusals = [] if self._settings.trust_templates else template_refusals(spec.get("template"))
        if refusals:
            # Not from a tenant's namespace into ours (docs/security.md#listener-pod): said on
            # the set, where its writer looks, and on the listener; a pod made from it before
            # (templates were trusted then) goes. Its edit brings it back.
            await self._refuse_template(p, refusals)
            await self._delete_extra_pods(p, keep=0)
            return Result()
        refused = template_problem(cached)
        if refused is not None:
            # The template is the listener's spec: its edit brings the listener back.
            await self._refuse(cached, uid, "ListenerTemplateInvalid", refused)
            return Result()
        self._refused.pop(uid, None)
        if standby_lease_name(cached):
            await self._ensure_lease(p)
        secret = config_secret(cached, config)
        await self._ensure(p, secret, SECRET)
        return await self._ensure_pods(p, config_digest=_digest(secret))

    async def _refuse(self, listener: JSONDict, uid: str, reason: str, message: str) -> None:
        """A warning Event, once for each reason the listener cannot run."""
        if self._refused.get(uid) != message:
            self._refused[uid] = message
            await self._events.warning(listener, reason=reason, message=message)

    async def _refuse_template(self, p: Pass, refusals: list[str]) -> None:
        listener, uid = p.object, p.uid
        message = (
            "listenerTemplate sets what only the operator may set on a listener pod: "
            + ", ".join(f"listenerTemplate.{path}" for path in refusals)
            + "; a template may set labels, annotations, scheduling and the listener "
            "container's resources and env (docs/security.md#listener-pod)"
        )
        if self._refused.get(uid) == message:
            return
        p.log.warning("no listener pod: %s", message)
        spec = listener.get("spec") or {}
        runner_set = self._sets.get(
            str(spec.get("autoscalingRunnerSetNamespace")),
            str(spec.get("autoscalingRunnerSetName")),
        )
        if runner_set is not None:
            await self._events.warning(
                runner_set, reason="ListenerTemplateRefused", message=message
            )
        await self._refuse(listener, uid, "ListenerTemplateRefused", message)

    # --- children ------------------------------------------------------------------------------

    async def _config(self, listener: JSONDict) -> JSONDict:
        """The listener's config: ARC's keys, the credentials read from the GitHub Secret and
        the CA from its ConfigMap."""
        spec = listener.get("spec") or {}
        namespace = str(spec.get("autoscalingRunnerSetNamespace"))
        github = await self._objects.get(SECRET, namespace, str(spec.get("githubConfigSecret")))
        credentials = {
            key: secret_value(github, key) or ""
            for key in (
                SECRET_GITHUB_TOKEN,
                SECRET_GITHUB_APP_ID,
                SECRET_GITHUB_APP_INSTALLATION_ID,
                SECRET_GITHUB_APP_PRIVATE_KEY,
            )
        }
        if credentials[SECRET_GITHUB_TOKEN]:
            # ARC's "tidy": with a token, only the token is kept.
            credentials = {SECRET_GITHUB_TOKEN: credentials[SECRET_GITHUB_TOKEN]}
        pem = await root_ca(self._objects, namespace, spec.get("githubServerTLS")) or ""
        settings = self._settings
        return listener_config(
            listener,
            credentials=credentials,
            root_ca=pem,
            log_level=settings.log_level,
            log_format=settings.log_format,
            metrics_addr=settings.metrics_addr,
            metrics_endpoint=settings.metrics_endpoint if settings.metrics_addr else "",
            standby=settings.standby,
            allow_insecure_github=settings.allow_insecure_github,
            metrics_auth=settings.metrics_auth,
        )

    async def _ensure(self, p: Pass, desired: JSONDict, kind: Kind) -> None:
        meta = desired["metadata"]
        await self._write(p, desired, kind, await self._read(kind, meta["namespace"], meta["name"]))

    async def _read(self, kind: Kind, namespace: str, name: str) -> JSONDict | None:
        try:
            return await self._objects.get(kind, namespace, name)
        except NotFound:
            return None

    async def _write(
        self,
        p: Pass,
        desired: JSONDict,
        kind: Kind,
        current: JSONDict | None,
        *,
        fields: Iterable[str] = (),
    ) -> None:
        """Create the object, or patch what we compute of it when its integrity hash or labels
        differ or one of `fields` was edited (a key someone else added stays)."""

        def drift(current: JSONDict, desired: JSONDict) -> list[str]:
            want = desired["metadata"]
            have = metadata_of(current)
            drifted = [f for f in fields if _normalized(current.get(f)) != desired[f]]
            if (have.get("annotations") or {}).get(ANNOTATION_INTEGRITY_HASH) != want[
                "annotations"
            ][ANNOTATION_INTEGRITY_HASH]:
                drifted.append("content")
            labels = have.get("labels") or {}
            if any(labels.get(k) != v for k, v in want["labels"].items()):
                drifted.append("metadata.labels")
            return drifted

        await p.ensure(kind, desired, current, drift=drift)

    async def _ensure_role(self, p: Pass) -> None:
        """The Role. When standby was turned off, the extra pods and the Lease are deleted
        before the rule that lets them renew it goes: a Role that still grants the Lease is
        what tells a later pass (or a restarted controller) that they may be left."""
        listener = p.object
        desired = role(listener)
        meta = desired["metadata"]
        current = await self._read(ROLE, meta["namespace"], meta["name"])
        if current is not None and not standby_lease_name(listener) and grants_lease(current):
            await self._delete_extra_pods(p, keep=1)
            await p.delete(LEASE, Request(meta["namespace"], lease_name(listener)))
        await self._write(p, desired, ROLE, current, fields=("rules",))

    async def _ensure_role_binding(self, p: Pass) -> None:
        """The RoleBinding, its subjects brought back when edited; its roleRef cannot be
        changed in place, so a binding to another role is deleted and made again."""
        desired = role_binding(p.object)
        meta = desired["metadata"]
        current = await self._read(ROLE_BINDING, meta["namespace"], meta["name"])
        if current is not None and _normalized(current.get("roleRef")) != desired["roleRef"]:
            p.log.info(
                "re-creating RoleBinding %s/%s: roleRef edited", meta["namespace"], meta["name"]
            )
            await p.delete(ROLE_BINDING, Request(meta["namespace"], meta["name"]))
            current = None
        await self._write(p, desired, ROLE_BINDING, current, fields=("subjects",))

    async def _ensure_lease(self, p: Pass) -> None:
        """Made before the pods, so that none of them needs `create` on Leases. Never updated:
        its holder, renewals and annotations belong to the pods."""
        desired = lease(p.object)
        meta = desired["metadata"]
        if await self._read(LEASE, meta["namespace"], meta["name"]) is None:
            await p.ensure(LEASE, desired, None)

    async def _delete_extra_pods(self, p: Pass, *, keep: int) -> bool:
        """Delete the pods of replicas `keep` and above (as the cache shows them); True while
        any of them is left."""
        namespace = p.key.namespace
        left = False
        for replica in range(keep, MAX_LISTENER_REPLICAS):
            name = pod_name(p.object, replica)
            pod = self._pods.get(namespace, name)
            if pod is None:
                continue
            left = True
            if not is_deleting(pod):
                await p.delete(POD, Request(namespace, name))
        return left

    async def _ensure_pods(self, p: Pass, *, config_digest: str) -> Result:
        """Each replica's pod on its own; the earliest requeue of any of them."""
        listener = p.object
        replicas = listener_replicas(listener)
        await self._delete_extra_pods(p, keep=replicas)
        delays: list[float] = []
        states: list[bool] = []
        for replica in range(replicas):
            result, running = await self._ensure_pod(p, replica, config_digest=config_digest)
            if result.requeue_after is not None:
                delays.append(result.requeue_after)
            if running is not None:
                states.append(running)
        if states:
            self._gauge.publish(listener, running=any(states))
        return Result(requeue_after=min(delays)) if delays else Result()

    async def _ensure_pod(
        self, p: Pass, replica: int, *, config_digest: str
    ) -> tuple[Result, bool | None]:
        """One replica's pass, and whether its listener runs (None: unknown, being replaced)."""
        listener, uid = p.object, p.uid
        namespace = metadata_of(listener)["namespace"]
        desired = listener_pod(
            listener,
            config_digest=config_digest,
            metrics_addr=self._settings.metrics_addr,
            replica=replica,
            entrypoint=self._settings.entrypoint,
            resources=self._settings.resources,
        )
        name = desired["metadata"]["name"]
        restarts = self._restarts.setdefault((uid, replica), _Restarts())
        pod = self._pods.get(namespace, name)
        now = self._clock()
        if pod is None:
            if now < restarts.not_before:
                return Result(requeue_after=restarts.not_before - now), False
            try:
                await p.ensure(POD, desired, None)
            except Forbidden as exc:
                if isinstance(exc, NamespaceTerminating):
                    raise
                # Pod Security admission (the namespace enforces `restricted`) refusing what a
                # trusted template asked for: said on the listener, tried again in a resync.
                await self._refuse(listener, uid, "ListenerPodRefused", str(exc))
                return Result(requeue_after=self._settings.resync_seconds), False
            return Result(), False
        if is_deleting(pod):
            return Result(), None
        want = desired["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH]
        have = (metadata_of(pod).get("annotations") or {}).get(ANNOTATION_INTEGRITY_HASH)
        if have != want:
            p.log.info("re-creating listener pod %s: its config changed", name)
            await p.delete(POD, Request(namespace, name))
            return Result(), None
        stopped = self._stopped(pod)
        if stopped is not None:
            return await self._restart(p, name, restarts, stopped), False
        await self._report_waiting(listener, uid, replica, pod)
        running = self._container_state(pod, "running")
        if pod_ready(pod):
            restarts.ready_since = restarts.ready_since or now
            if now - restarts.ready_since >= self._settings.stable_seconds:
                restarts.count = 0
            elif restarts.count:
                return Result(requeue_after=self._settings.stable_seconds), running
        else:
            restarts.ready_since = None
        return Result(requeue_after=self._settings.resync_seconds), running

    async def _restart(self, p: Pass, name: str, restarts: _Restarts, why: str) -> Result:
        listener = p.object
        restarts.count += 1
        restarts.ready_since = None
        delay = min(
            self._settings.restart_backoff_seconds * 2 ** (restarts.count - 1),
            self._settings.restart_backoff_max_seconds,
        )
        restarts.not_before = self._clock() + delay
        if restarts.count >= CRASH_LOOP_EVENT_AFTER:
            who = "listener" if listener_replicas(listener) == 1 else f"listener pod {name}"
            await self._events.warning(
                listener,
                reason="ListenerCrashLooping",
                message=f"{who} stopped {restarts.count} times in a row ({why}); "
                f"next start in {delay:.0f}s",
            )
        p.log.warning("listener %s stopped (%s); restarting in %.1fs", name, why, delay)
        await p.delete(POD, Request(p.key.namespace, name))
        return Result(requeue_after=delay)

    async def _report_waiting(
        self, listener: JSONDict, uid: str, replica: int, pod: JSONDict
    ) -> None:
        """A warning Event on the listener when a container of its pod cannot start (a
        template's sidecar that must run as root, a missing Secret, an image that cannot be
        pulled), once for each reason; the pod's own events are in the controller namespace,
        where users of the set may not look."""
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
            self._waiting.pop((uid, replica), None)
            return
        name, waiting = stuck[0]
        message = f"container {name} of pod {metadata_of(pod)['name']} cannot start: " + (
            f"{waiting['reason']}: {waiting['message']}"
            if waiting.get("message")
            else str(waiting["reason"])
        )
        if self._waiting.get((uid, replica)) != message:
            self._waiting[(uid, replica)] = message
            await self._events.warning(listener, reason="ListenerContainerWaiting", message=message)

    @staticmethod
    def _stopped(pod: JSONDict) -> str | None:
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

    @staticmethod
    def _container_state(pod: JSONDict, state: str) -> bool:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            if container.get("name") == LISTENER_CONTAINER:
                return state in (container.get("state") or {})
        return False

    # --- deletion ------------------------------------------------------------------------------

    async def _finalize(self, p: Pass) -> Result:
        obj, uid = p.object, p.uid
        if not has_any_finalizer(obj, [FINALIZER_AUTOSCALING_LISTENER]):
            return Result()
        meta = metadata_of(obj)
        runner_namespace = str((obj.get("spec") or {}).get("autoscalingRunnerSetNamespace"))
        # The Lease is touched only when standby replicas ran: an ARC-style listener needs no
        # permission on Leases, even to be deleted.
        if any(
            self._pods.get(meta["namespace"], pod_name(obj, replica))
            for replica in range(1, MAX_LISTENER_REPLICAS)
        ):
            self._lease_owed.add(uid)
        standby = bool(standby_lease_name(obj)) or uid in self._lease_owed
        # Pods first, and nothing else until they are gone: a listener stopping on SIGTERM
        # still needs its Role (a standby releases its Lease, the holder deletes its session's
        # state), so the Role, its binding and the Lease go only after the last pod.
        if await self._delete_extra_pods(p, keep=0):
            return Result(requeue_after=WAIT)
        left = False
        # Only what was made (the proxy Secret with a proxy), each once: a DELETE answered
        # without finalizers holding the object means it went, so it is not asked for again
        # when another child keeps the pass coming back.
        children: list[tuple[Kind, str, str]] = [
            (SECRET, meta["namespace"], f"{meta['name']}-config")
        ]
        if (obj.get("spec") or {}).get("proxy"):
            children.append((SECRET, meta["namespace"], f"{meta['name']}-proxy"))
        if standby:
            children.append((LEASE, runner_namespace, lease_name(obj)))
        children += [
            (ROLE_BINDING, runner_namespace, meta["name"]),
            (ROLE, runner_namespace, meta["name"]),
            (SERVICE_ACCOUNT, meta["namespace"], meta["name"]),
        ]
        gone = self._gone.setdefault(uid, set())
        for child in children:
            if child in gone:
                continue
            kind, namespace, name = child
            try:
                answer = await self._objects.delete(kind, namespace, name)
                # Some kinds answer with the deleted object: held only with finalizers left.
                if answer is not None and metadata_of(answer).get("finalizers"):
                    left = True
                    continue
                p.log.info("deleted %s %s/%s", kind.kind, namespace, name)
            except NotFound:
                pass
            except KubeError as exc:
                await p.warn(
                    "CannotDelete",
                    f"cannot delete {kind.kind} {namespace}/{name}: {exc}",
                    subject=child,
                    event=False,
                )
                left = True
                continue
            gone.add(child)
        if left:
            return Result(requeue_after=WAIT)
        await remove_finalizers(p.lazy, self._objects, [FINALIZER_AUTOSCALING_LISTENER])
        p.log.info("finalizer removed")
        for replica in range(MAX_LISTENER_REPLICAS):
            self._restarts.pop((uid, replica), None)
            self._waiting.pop((uid, replica), None)
        self._lease_owed.discard(uid)
        self._gone.pop(uid, None)
        self._gauge.series.pop(Request.of(obj), None)
        return Result()


def config_problem(config: JSONDict) -> str | None:
    """Why `gha-listener` would refuse this config, checked with its own model
    (shared.listenerconfig), in one line without any value; None when it would load it."""
    try:
        ListenerConfig.model_validate(config)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return None


def _normalized(value: object) -> object:
    """A stored RBAC field as we write it: the API server may add empty fields (a subject's
    `apiGroup: ""`)."""
    if isinstance(value, list):
        return [_normalized(item) for item in value]
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if v not in ("", None, [])}
    return value


def _digest(secret: JSONDict) -> str:
    return str(secret["metadata"]["annotations"][ANNOTATION_INTEGRITY_HASH])


def setup(manager: Manager, deps: Deps) -> AutoscalingListenerReconciler:
    """Add the AutoscalingListener controller to `manager`: listeners and their pods."""
    if deps.listener is None:
        raise ValueError("the AutoscalingListener reconciler needs in-cluster settings")
    reconciler = AutoscalingListenerReconciler(
        listeners=manager.cache(AUTOSCALING_LISTENER),
        sets=manager.cache(AUTOSCALING_RUNNER_SET),
        # Its pods' metadata (the integrity hash) and status: their spec is never read back.
        pods=manager.cache(POD, reads=("status",)),
        objects=manager.objects,
        events=deps.events,
        settings=deps.listener,
        meter=manager.metrics.metrics.meter,
    )
    manager.add(
        Controller(
            name="autoscalinglistener",
            for_=AUTOSCALING_LISTENER,
            reconciler=reconciler,
            owns=[Owns(POD)],
        )
    )
    return reconciler
